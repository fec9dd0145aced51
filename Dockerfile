# syntax=docker/dockerfile:1
# The fleetcache service image: compiled JavaScript on Node 24, production dependencies only,
# running as a non-root user. Build from the repository root: docker build -t fleetcache:dev .

# 1. Compile the TypeScript sources to dist/.
FROM node:24-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
# --ignore-scripts: the pinned-Node dev dependency's download is not needed inside node:24.
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY lib lib
COPY cmd cmd
COPY fixtures fixtures
RUN npx tsc -p tsconfig.build.json

# 2. Production dependencies. @kubernetes/client-node is a peer dependency of the library (dev
#    for this repository), so the service image installs it explicitly at the peer range.
FROM node:24-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund \
 && npm install --no-save --omit=dev --ignore-scripts --no-audit --no-fund \
      "@kubernetes/client-node@$(node -p "require('./package.json').peerDependencies['@kubernetes/client-node']")" \
 && npm cache clean --force

# 3. The runtime: no compiler, no npm cache. The git promotion strategy runs Debian's git (2.39,
#    bookworm) without a shell, and ssh for ssh:// repositories.
FROM node:24-slim
ENV NODE_ENV=production
RUN apt-get update \
 && apt-get install -y --no-install-recommends git openssh-client ca-certificates \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY --from=deps /app/node_modules node_modules
COPY package.json ./
COPY --from=build /src/dist/lib dist/lib
COPY --from=build /src/dist/cmd dist/cmd
COPY --from=build /src/dist/fixtures dist/fixtures
# The image's `node` user (uid 1000); numeric so that runAsNonRoot can verify it.
USER 1000:1000
EXPOSE 8443 8081
ENTRYPOINT ["node", "dist/cmd/fleetcache.js"]
