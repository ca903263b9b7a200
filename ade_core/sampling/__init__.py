"""Strategic diversity sampling (seed 001): samplers that commit to distinct approaches before solving.

``plans`` reads a planning call's reply (a Verbalized Sampling list, a Groot tree with its paths).
"""
