#!/usr/bin/env bash
# Container smoke test: build the image, run `bot check` in it against a
# throw-away config, start the bot and wait for /readyz to say ready, then stop
# it. Needs a Docker engine; where there is none (the docker client alone, or
# no docker at all) it says so and exits 0 at once, having tested nothing.
#
#   packaging/smoke-docker.sh            # from the repository root
#   DETOUR_SMOKE_KEEP=1 ...              # keep the image afterwards
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v docker >/dev/null 2>&1; then
  echo "smoke-docker: skipped: no docker command on this machine (nothing was tested)"
  exit 0
fi
if ! timeout 5 docker info >/dev/null 2>&1; then
  echo "smoke-docker: skipped: the docker client cannot reach a Docker engine (docker info failed; nothing was tested)"
  exit 0
fi

tag="detour-smoke:$$"
name="detour-smoke-$$"
work="$(mktemp -d)"
cleanup() {
  docker rm -f "$name" >/dev/null 2>&1 || true
  [ -n "${DETOUR_SMOKE_KEEP:-}" ] || docker rmi -f "$tag" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

version="$(git describe --tags --always --dirty 2>/dev/null || echo smoke)"
echo "== docker build ($version)"
docker build --build-arg VERSION="$version" -t "$tag" .

# A config with a loopback provider (no key, no network) and the console off,
# so the bot needs nothing outside the container; the operations endpoint on
# 0.0.0.0 inside, published on a free port of 127.0.0.1.
cat >"$work/config.yaml" <<'YAML'
channels:
  console: {enabled: false}
  discord: {enabled: false}
  slack: {enabled: false}
providers:
  local: {base_url: "http://127.0.0.1:11434/v1"}
agents:
  defaults:
    model: {primary: local/model-a, fallbacks: [local/model-b]}
server: {listen: "0.0.0.0:9464"}
YAML

echo "== docker run ... version"
docker run --rm "$tag" version | tee "$work/version"
grep -q "^detour $version" "$work/version"

echo "== docker run ... check (no channel enabled: must exit 2)"
set +e
docker run --rm -v "$work/config.yaml:/etc/detour/config.yaml:ro" "$tag" check --config /etc/detour/config.yaml
code=$?
set -e
[ "$code" = 2 ] || { echo "smoke-docker: FAIL: check exited $code, want 2"; exit 1; }

# A channel that needs nothing outside: the console in jsonl, fed nothing but
# kept open by -i with a held stdin.
sed -i 's/console: {enabled: false}/console: {enabled: true, format: jsonl}/' "$work/config.yaml"
echo "== docker run ... check"
docker run --rm -v "$work/config.yaml:/etc/detour/config.yaml:ro" "$tag" check --config /etc/detour/config.yaml

echo "== docker run -d ... (the bot) and /readyz"
docker run -d -i --name "$name" -p 127.0.0.1::9464 \
  -v "$work/config.yaml:/etc/detour/config.yaml:ro" "$tag" >/dev/null
port="$(docker port "$name" 9464/tcp | head -n1 | sed 's/.*://')"
for _ in $(seq 1 60); do
  if body="$(curl -fsS "http://127.0.0.1:$port/readyz" 2>/dev/null)"; then
    echo "/readyz: $body"
    case "$body" in
      "ready (detour $version"*) echo "== ok"; exit 0 ;;
      *) echo "smoke-docker: FAIL: /readyz said: $body"; exit 1 ;;
    esac
  fi
  sleep 1
done
echo "smoke-docker: FAIL: /readyz did not answer within 60 s"
docker logs "$name" || true
exit 1
