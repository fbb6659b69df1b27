"""What several papers share: experiments, training, metrics, data and network blocks.

Nothing here imports a paper subpackage.
"""
