# One image, three entry points: `compactor-webhook`, `compactor-controller` and
# `compactor-extender` (beside kube-scheduler in the compaction scheduler's Pod).
# Build: docker build -t compactor:0.1.0 .
FROM python:3.11-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY compaction ./compaction
COPY webhook ./webhook
COPY controller ./controller
COPY kubectl_compactor ./kubectl_compactor
COPY certs ./certs
RUN python -m venv /opt/compactor && /opt/compactor/bin/pip install --no-compile .

FROM python:3.11-slim-bookworm
# No compilers or pip caches here: only the interpreter and the installed venv.
COPY --from=build /opt/compactor /opt/compactor
ENV PATH=/opt/compactor/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
USER 65532:65532
EXPOSE 8443 8080
ENTRYPOINT []
CMD ["compactor-webhook"]
