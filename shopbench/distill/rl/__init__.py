"""On-policy training in the arena's own environment: TRL's GRPO over :class:`ShoppingEnv`.

``environment`` holds the environment TRL builds one of per rollout, ``rows`` the dataset of
tasks it resets from, ``rewards`` the reward functions (outcome, dense, judge), ``config`` the
typed run config and ``trainer`` the run itself.
"""
