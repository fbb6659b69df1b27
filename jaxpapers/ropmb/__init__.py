"""jaxpapers.ropmb (being written)."""
