"""jaxpapers.ivp (being written)."""
