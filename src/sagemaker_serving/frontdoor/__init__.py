"""frontdoor."""
