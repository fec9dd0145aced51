# syntax=docker/dockerfile:1
# The fleetcache service image: compiled JavaScript on Node 24, production dependencies only,
# running as a non-root user. Build from the repository root: docker build -t fleetcache:dev .

# 1. Compile the package to dist/, exactly as `npm run build` does (tsconfig.build.json).
FROM node:24-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
# --ignore-scripts: the pinned-Node dev dependency's download is not needed inside node:24.
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY lib lib
COPY cmd cmd
COPY fixtures fixtures
COPY e2e/testing.ts e2e/testing.ts
COPY e2e/harness e2e/harness
RUN npx tsc -p tsconfig.build.json

# 2. The runtime dependencies, exactly as locked. @kubernetes/client-node is a peer dependency of
#    the package, not a devDependency: npm installs a project's own peer dependencies and locks
#    them ("peer": true), and --omit=dev keeps them. Nothing is resolved outside the lockfile.
FROM node:24-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force

# 3. The runtime: the service's code (dist/lib and dist/cmd: the bin imports nothing else; no
#    fixtures, no test helpers), no compiler, no npm cache. The git promotion strategy runs
#    Debian's git (2.39, bookworm) without a shell, and ssh for ssh:// repositories.
FROM node:24-slim
ENV NODE_ENV=production
# V8 grows its young generation with the allocation rate, up to 128 MiB on a large heap: a fleet
# syncing at once commits that much although no cached object stays there, and what the burst
# promotes leaves the old generation fragmented. With 8 MiB semi-spaces a cold sync takes no longer
# (0.93x the time of 16 MiB, 0.88x the peak RSS: bench/cold-sync.bench.ts) and a cluster's fixed
# cost is 153-164 KiB instead of 208-221 (bench/percluster.bench.ts --semi=8); the price is about
# 30 % more CPU while hundreds of clusters sync at once (bench/scale.bench.ts --semi=8). A manifest
# that sets NODE_OPTIONS replaces this line: config/manager/manager.yaml repeats it.
ENV NODE_OPTIONS=--max-semi-space-size=8
RUN apt-get update \
 && apt-get install -y --no-install-recommends git openssh-client ca-certificates \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY --from=deps /app/node_modules node_modules
COPY package.json LICENSE ./
COPY --from=build /src/dist/lib dist/lib
COPY --from=build /src/dist/cmd dist/cmd
# The image's `node` user (uid 1000); numeric so that runAsNonRoot can verify it.
USER 1000:1000
EXPOSE 8443 8081
ENTRYPOINT ["node", "dist/cmd/fleetcache.js"]
