"""The only HTTP to the API server: REST calls, pages, throttling, and the watch caches."""
