"""jaxpapers.markov_games (being written)."""
