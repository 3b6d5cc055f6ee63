# syntax=docker/dockerfile:1
#
# detour in a container: built with cgo (the SQLite driver is C), run as a
# non-root user on a small glibc image that has the CA certificates, with its
# state in /var/lib/detour (the working folder, so a relative storage.dsn such
# as "detour.db" lands there).
#
#   docker build -t detour .
#   docker build --build-arg VERSION=v1.2.3 -t detour:v1.2.3 .
#   docker run -d --name detour \
#     -v detour-state:/var/lib/detour \
#     -v "$PWD/config.yaml:/etc/detour/config.yaml:ro" \
#     --env-file detour.env \
#     -p 127.0.0.1:9464:9464 \
#     detour
#
# With server.listen: "0.0.0.0:9464" in config.yaml, /healthz, /readyz and
# /metrics are reachable through the published port. `docker stop` sends
# SIGTERM: the bot finishes its in-flight turns (30 s grace) before it exits, so
# give it `--stop-timeout 45` (or stop_grace_period in compose). The binary is
# /usr/local/bin/bot, as everywhere; `docker kill -s HUP detour` reloads (exit 3,
# restarted by --restart on-failure). packaging/smoke-docker.sh builds and tries
# this image where a Docker engine runs. .git is not in the build context, so
# pass --build-arg VERSION=... for a version other than "devel".

ARG GO_VERSION=1.26

FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=""
RUN CGO_ENABLED=1 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/bot ./cmd/bot \
 && mkdir -p /out/state /out/etc \
 && chmod 0700 /out/state

# distroless base: glibc (for cgo), CA certificates, tzdata, a "nonroot" user
# (uid 65532), no shell and no package manager.
FROM gcr.io/distroless/base-debian12:nonroot
COPY --from=build /out/bot /usr/local/bin/bot
COPY --from=build --chown=65532:65532 /out/state /var/lib/detour
COPY --from=build /out/etc /etc/detour
USER 65532:65532
WORKDIR /var/lib/detour
VOLUME ["/var/lib/detour"]
EXPOSE 9464
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/bot"]
CMD ["run", "--config", "/etc/detour/config.yaml", "--log-format", "json"]
