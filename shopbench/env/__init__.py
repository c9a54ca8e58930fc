"""The shopping environment: tools, episodes and episode-scoped ids.

`ShoppingEnv.open(catalog_dir).new_episode(task)` gives an :class:`Episode` whose `call`
runs ShoppingBench's tools (find_product, view_product_information, recommend_product,
terminate, and web_search on knowledge tasks) and answers with the text the agent sees.
"""
