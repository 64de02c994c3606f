# syntax=docker/dockerfile:1
# lastseen: one image for the node agent (`lastseen agent`) and the heartbeat sidecar
# (`lastseen heartbeat`). The runtime holds Node.js 24 LTS and two esbuild bundles: the whole CLI
# (/app/lastseen.mjs, the entrypoint) and the heartbeat sidecar's own (/app/lastseen-heartbeat.mjs:
# only `heartbeat`, without @kubernetes/client-node, about a third of the CLI's memory). Parent pods
# run the sidecar with `command: [/nodejs/bin/node, --max-semi-space-size=1, /app/lastseen-heartbeat.mjs]`
# (deploy/examples/parent-daemonset.yaml).
#
#   docker build --build-arg LASTSEEN_COMMIT=$(git rev-parse HEAD) -t ghcr.io/lastseen/lastseen:0.1.0 .
#   docker buildx build --platform linux/amd64,linux/arm64 -t ... .
#
# The released image is not built from this file but by `npm run release:image` (crane, from
# Node.js's npm packages and Debian's .debs, reproducible, with an SBOM; docs/release.md). This file
# describes the same image (paths, user, entrypoint, working folder, labels) for those who build
# with an engine; test/unit/release-image.test.ts checks the two agree. Pin both base images by
# digest in release builds (FROM image@sha256:...).

# The bundle is plain JavaScript, the same for every target platform: build it once, natively.
FROM --platform=$BUILDPLATFORM node:24-bookworm-slim AS build
WORKDIR /src
# Dependencies first, so that source edits reuse the cached `npm ci` layer.
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json ./
COPY scripts/bundle.mjs scripts/bundle.mjs
COPY src ./src
# The build context has no .git: the commit that `lastseen --version` names comes in as an argument.
ARG LASTSEEN_COMMIT=""
RUN LASTSEEN_COMMIT="$LASTSEEN_COMMIT" npm run bundle && node dist/lastseen.mjs --help >/dev/null && node dist/lastseen-heartbeat.mjs heartbeat --help >/dev/null

# Distroless: no shell, no package manager; Node lives at /nodejs/bin/node.
# Runs as uid 65532 by default, which suits the heartbeat sidecar; the agent's DaemonSet asks
# for uid 0 explicitly (it writes the root-owned kubelet manifest folder) with every capability
# dropped.
FROM gcr.io/distroless/nodejs24-debian12:nonroot
LABEL org.opencontainers.image.title="lastseen" \
      org.opencontainers.image.description="Heartbeat-lease checkpoint controller for Kubernetes" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/lastseen/lastseen"
WORKDIR /app
COPY --from=build /src/dist/lastseen.mjs /src/dist/lastseen-heartbeat.mjs /app/
ENV NODE_ENV=production
# glibc's malloc gives each thread that allocates (libuv's pool: file reads, TLS) its own arena and
# keeps what is freed there: at 200 parents beating every second the agent's RSS was 194 MiB with
# 25-50 MiB of V8 heap in use; with two arenas 139 MiB, same code, same time (docs/footprint.md).
# The release image (scripts/release-image.mjs) sets it the same way; the deploy bundle and the
# chart run this image.
ENV MALLOC_ARENA_MAX=2
# No V8 compile cache (NODE_COMPILE_CACHE): the released image (scripts/release-image.mjs) is
# assembled from packages for two architectures without running them, so it cannot make one, and
# this file describes that image. Measured when it was here (issue 14): `agent --help` 0.22 -> 0.17 s
# and 88 -> 83 MiB peak with the cache.
USER 65532
# The agent's health port (hostNetwork: it is the node's port).
EXPOSE 9870
# --max-semi-space-size=1 (MiB): V8's young generation otherwise grows to 16 MiB of semi-spaces
# that an idle agent or sidecar never needs. Measured (issue 14, bench/v8-flags.ts, medians of 4
# interleaved runs): agent 95.9 -> 90.2 MiB after 12 s idle, heartbeat sidecar 90.5 -> 84.5 MiB;
# start to /readyz and idle CPU within the noise. --single-threaded-gc measured no better.
# --max-old-space-size=256 (MiB): the heap Node.js already gives the agent under the DaemonSet's
# 256Mi limit (it sizes V8's heap from the cgroup's memory limit: 256 MiB for any limit up to
# 512Mi), written down so the agent's heap does not depend on the limit set, or on there being one:
# with no limit on a 24 GiB machine the heap's limit was 4 GiB, and the larger that limit, the
# further V8 lets the heap grow past what is live before a full collection. 200 parents beating
# every second (bench footprint, three paired runs): RSS p50 132-175 -> 112.5-112.9 MiB; without
# the flag but inside a 256Mi cgroup the agent ran at 112 (docs/footprint.md). It uses 25-90 MiB.
ENTRYPOINT ["/nodejs/bin/node", "--max-semi-space-size=1", "--max-old-space-size=256", "/app/lastseen.mjs"]
CMD ["--help"]
