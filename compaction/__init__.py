"""The shared domain of Compactor: policy model, scope matching, precedence, intent format, names.

Pure code only. The webhook and the controller both import it and nothing here imports
Starlette, uvicorn or a Kubernetes client (an import-linter contract keeps it so).
"""
