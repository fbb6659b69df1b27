"""jaxpapers.cayley (being written)."""
