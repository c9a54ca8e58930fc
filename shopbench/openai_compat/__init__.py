"""Talking to OpenAI-compatible servers (vLLM, ``transformers serve``, hosted APIs).

``spec`` parses ``openai:MODEL@URL``; ``urls`` finds a server's routes; ``config`` is the
client's typed settings; ``client`` the one HTTP client (retries, ``Retry-After``, an
injectable sleep); ``errors`` its exception family; ``keys`` the one reader of API keys.
"""
