# syntax=docker/dockerfile:1
# askgate in a container: `docker build -t askgate .` then
#   docker run -d --name askgate -p 8080:8080 -v askgate-data:/var/lib/askgate \
#     -e TELEGRAM_BOT_TOKEN=… askgate
# The database (and the generated API token, askgate.token) live on the volume; mount your own
# channels.toml over /etc/askgate/channels.toml. Beside it are the programs the bundled one
# names and the Python helper they import (what `askgate init` writes); mount yours beside it
# too. See docs/src/deploying.md.

FROM rust:1-trixie AS build
# The commit `askgate --version` names (.git is not copied in):
#   docker build --build-arg ASKGATE_COMMIT=$(git rev-parse --short=12 HEAD) -t askgate .
ARG ASKGATE_COMMIT=unknown
WORKDIR /src
COPY . .
# The registry and the build directory are cache mounts: a change to askgate's own source
# rebuilds askgate, not its dependencies. `full`: every chat platform (the default build has
# Telegram and those over plain HTTP only). The `dist` profile optimises the whole program at
# once: smaller and cheaper to run than the release build, in a longer build.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --profile dist --locked --features full --bin askgate \
 && cp target/dist/askgate /usr/local/bin/askgate \
 && strip /usr/local/bin/askgate

FROM debian:trixie-slim
# curl for the health check, python3 for the bundled process functions and the Python helper.
# Versions are not pinned: Debian stable replaces a package's version with each security fix
# and keeps only the newest, so a pinned version stops building; stable's updates are the
# point of using it.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl python3 \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --user-group --home-dir /var/lib/askgate --create-home askgate
COPY --from=build /usr/local/bin/askgate /usr/local/bin/askgate
# The configuration and what it names: `askgate check` in the image finds every program.
COPY channels.toml /etc/askgate/channels.toml
COPY examples /etc/askgate/examples
COPY clients/python /etc/askgate/clients/python
ENV ASKGATE_CONFIG=/etc/askgate/channels.toml \
    ASKGATE_GATEWAY_DATABASE=/var/lib/askgate/askgate.db \
    ASKGATE_GATEWAY_HTTP=0.0.0.0:8080 \
    ASKGATE_LOG_FORMAT=json
VOLUME /var/lib/askgate
WORKDIR /var/lib/askgate
USER 10001:10001
EXPOSE 8080
HEALTHCHECK --interval=15s --timeout=3s --start-period=10s --retries=3 \
  CMD ["curl", "-fsS", "http://127.0.0.1:8080/healthz"]
# SIGTERM stops askgate within seconds (blocking asks are cancelled first).
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/askgate"]
CMD ["serve"]
