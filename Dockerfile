# The Flowbox engine: one binary (cmd/engine) serving the API, the UI and
# the workers, and the sandboxes' command agent (cmd/flowbox-agent).
#
#   docker build -t flowbox-engine .
#
# docker-compose.yml runs it with MongoDB and Redis and Docker sandboxes.
# bubblewrap is installed for the bwrap sandbox provider; in a container it
# needs user namespaces that Docker's default seccomp profile refuses, so
# the compose file uses the docker provider.

# The browser app (web/ui/app), which the engine embeds.
FROM node:20-bookworm AS ui
WORKDIR /src/web/ui
COPY web/ui/labels labels
COPY web/ui/app/package.json web/ui/app/package-lock.json app/
RUN cd app && npm ci --no-audit --no-fund
COPY web/ui/app app
RUN cd app && npm run build

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
COPY --from=ui /src/web/ui/app/dist web/ui/app/dist
# Pure Go (the embedded database uses modernc.org/sqlite): with cgo off the
# binaries are static, and the agent must be: the docker provider runs it
# inside every sandbox, whatever the image, as the sandbox's command agent.
# The engine takes flowbox-agent (the agent alone, a tenth of its size)
# from beside itself; without it, the engine's own sandbox-agent command.
RUN CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o /out/flowbox-engine ./cmd/engine \
	&& CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o /out/flowbox-agent ./cmd/flowbox-agent

FROM debian:bookworm-slim
RUN apt-get update \
	&& apt-get install -y --no-install-recommends bubblewrap ca-certificates \
	&& rm -rf /var/lib/apt/lists/*
COPY --from=build /out/flowbox-engine /out/flowbox-agent /usr/local/bin/
ENV FLOWBOX_DATA_DIR=/var/lib/flowbox \
	FLOWBOX_HTTP_ADDR=:8080
VOLUME /var/lib/flowbox
EXPOSE 8080
# Root: the engine talks to the Docker socket and removes sandbox files
# that root inside the sandboxes created.
ENTRYPOINT ["flowbox-engine"]
CMD ["serve"]
