"""Load test and benchmark of the admission webhook (`make bench`)."""
