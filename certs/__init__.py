"""Webhook TLS: CA and serving certificates, rotation, caBundle injection."""
