# syntax=docker/dockerfile:1
#
# flink-jar-gateway, for running next to a Flink JobManager (see examples/kubernetes/).
#
#   docker build -t flink-jar-gateway:0.1.0 .
#   docker run --rm -p 8081:8081 flink-jar-gateway:0.1.0 -Dgateway.cluster.rest-url=http://jobmanager:8081
#
# The image has no Java: it always fronts an existing JobManager (gateway.cluster.rest-url); without
# one it exits with a one-line message. It listens on 0.0.0.0, so with web.submit.jar-uri.enable: true
# it also needs authentication (gateway.auth.tokens-file or gateway.tls.client-ca) or it refuses to
# start. It holds no credentials: mount them as files (gateway.secrets.dir) or use a pod identity.
# It also carries the token bridge jar (token-bridge/, built with Maven below) at
# /opt/token-bridge/flink-jar-gateway-token-bridge.jar, for an init container to copy into the lib/
# of a stock Flink image (examples/kubernetes/flinkdeployment-session.yaml).
# test/deploy/dockerfile.test.ts checks this file.

# ---- token-bridge: the Flink-side jar (Java 17, Flink provided), without its tests ---------------
FROM maven:3.9-eclipse-temurin-17 AS token-bridge
WORKDIR /build
COPY token-bridge/pom.xml ./pom.xml
COPY token-bridge/src/main ./src/main
RUN mvn -B -q -Dmaven.test.skip=true package

# ---- build: compile TypeScript, then drop the dev dependencies ------------------------------------
FROM node:24-bookworm-slim AS build
WORKDIR /build
COPY package.json package-lock.json ./
# The `node` dev dependency's install script fetches Node 24 from the npm registry for the npm
# scripts (ADR 0003); here the base image's Node 24 would do, but `npm ci` stays the same everywhere.
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY bin ./bin
COPY src ./src
COPY fs-plugins ./fs-plugins
RUN npm run build \
 && npm prune --omit=dev --no-audit --no-fund

# ---- runtime: Node 24, uid/gid 9999 like the Flink image (shared web.upload.dir hand-off) --------
FROM node:24-bookworm-slim AS runtime
# A container must listen beyond loopback (the gateway's own default is 127.0.0.1). The environment
# outranks the YAML file: change the address with this variable, as the Kubernetes example does (the
# pod IP).
ENV NODE_ENV=production \
    FLINK_GATEWAY_REST_BIND_ADDRESS=0.0.0.0
RUN groupadd --system --gid 9999 flink \
 && useradd --system --uid 9999 --gid 9999 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin flink
WORKDIR /opt/flink-jar-gateway
# Owned by root and read-only for the gateway's user: the code cannot be changed at run time.
COPY --from=build /build/package.json ./package.json
COPY --from=build /build/node_modules ./node_modules
COPY --from=build /build/dist ./dist
COPY --from=build /build/bin ./bin
COPY README.md openapi.yaml ./
COPY docs ./docs
# Read by the init containers of the Kubernetes example; not used by the gateway itself.
COPY --from=token-bridge /build/target/flink-jar-gateway-token-bridge.jar /opt/token-bridge/flink-jar-gateway-token-bridge.jar
USER 9999:9999
EXPOSE 8081
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.FLINK_GATEWAY_REST_PORT || 8081) + '/gateway/v1/health').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
ENTRYPOINT ["node", "bin/flink-jar-gateway.js"]
