"""jaxpapers.ldp_rl (being written)."""
