# todoflow serve over Streamable HTTP (docs/deploy.md). Build from the repository root:
#   docker build -t todoflow .
FROM python:3.12-slim AS wheel
WORKDIR /src
COPY . .
RUN pip install --no-cache-dir build==1.* && python -m build --wheel --outdir /dist

FROM python:3.12-slim
RUN useradd --system --uid 10001 --create-home todoflow \
    && mkdir /flows /work && chown todoflow /work
COPY --from=wheel /dist/ /tmp/dist/
RUN pip install --no-cache-dir "$(ls /tmp/dist/todoflow-*.whl)[mcp,postgres,llm]" && rm -rf /tmp/dist
USER todoflow
WORKDIR /work
EXPOSE 8000
# /healthz: the process is up (no token needed); /readyz adds the database
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s \
    CMD ["python", "-c", "import urllib.request as u; u.urlopen('http://127.0.0.1:8000/readyz', timeout=2)"]
# the store from $TODOFLOW_STORE; the token from a file (a secret), never from the command line
ENTRYPOINT ["todoflow", "serve"]
CMD ["/flows", "--http", "0.0.0.0:8000", "--token-file", "/run/secrets/todoflow_token", "--workspace", "/work"]
