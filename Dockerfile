# syntax=docker/dockerfile:1
# The agent-pipeline image: the worker (default command) and the client, with the pinned Claude Code CLI.
#   docker build -t agent-pipeline .
#   docker run --rm -e TEMPORAL_ADDRESS=host:7233 -e ANTHROPIC_API_KEY -v workspaces:/workspaces agent-pipeline
# docker-compose.yml runs it next to a Temporal server; docs/deployment.md explains the settings.

# Node 22 LTS: the pinned Claude Code CLI requires Node >= 22. The same release .ci/run tests on (NODE_VERSION there;
# test/unit/node-version.test.ts keeps them equal and within package.json's `engines`).
ARG NODE_VERSION=22.23.3

# Build stage: all dependencies, compile TypeScript and bundle the workflows, then drop the dev dependencies.
FROM node:${NODE_VERSION}-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
# Scripts off for the install (dependencies' scripts are allowed one by one); the Claude Code package's own
# install script then puts the native `claude` binary for this platform in place.
RUN npm ci --ignore-scripts && npm rebuild @anthropic-ai/claude-code
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
# The build's own steps after tsc: the pipeline JSON Schema and the command line's bundle.
COPY scripts ./scripts
RUN npm run build && npm prune --omit=dev --ignore-scripts

# Runtime stage: Node, git (run worktrees, the agents' own git use), tini (signals and orphaned tool processes),
# bubblewrap and socat (Claude Code's sandbox around the agents' Bash), and the built app owned by root, so the
# unprivileged user can run it but not change it.
FROM node:${NODE_VERSION}-bookworm-slim AS runtime
RUN apt-get update \
  && apt-get install -y --no-install-recommends ca-certificates git tini bubblewrap socat \
  && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY bin ./bin
COPY examples ./examples
# Every run's workspace lives here; with several workers it must be shared storage (a volume all replicas mount).
RUN mkdir -p /workspaces && chown node:node /workspaces
# AGENT_PIPELINE_SANDBOX=required: a stage whose agent may run Bash fails (SANDBOX_UNAVAILABLE) rather than run
# unsandboxed. bubblewrap needs user namespaces and its own /proc: docker-compose.yml shows the container options.
ENV NODE_ENV=production \
    AGENT_PIPELINE_SANDBOX=required \
    AGENT_PIPELINE_WORKSPACES=/workspaces \
    AGENT_PIPELINE_HEALTH_FILE=/tmp/agent-pipeline-worker.health \
    AGENT_PIPELINE_LOG_FORMAT=json
USER node
VOLUME ["/workspaces"]
# Healthy while the worker polls Temporal: it touches its health file every few seconds.
HEALTHCHECK --interval=15s --timeout=10s --start-period=60s --retries=3 \
  CMD ["node", "bin/agent-pipeline.js", "worker", "--health-check"]
# SIGTERM drains: running stages get AGENT_PIPELINE_SHUTDOWN_GRACE, then resume on another worker.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/bin/tini", "--", "node", "bin/agent-pipeline.js"]
CMD ["worker"]
