# The ZooKeeper image of the compose ensemble (docs/docker.md): Debian's zookeeper package, run
# as its user `zookeeper` by docker/zookeeper-server, HEALTHCHECK on the server's mode. Like
# docker/Dockerfile it installs only the packages its base lacks, so it builds without network
# from the base `scripts/compose-demo.sh --isolated` makes with debootstrap.
ARG BASE=debian:bookworm-slim

FROM ${BASE}
RUN set -eu; \
    missing=""; \
    for package in zookeeper default-jre-headless; do \
      dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" \
        || missing="$missing $package"; \
    done; \
    if [ -n "$missing" ]; then \
      apt-get update -q; \
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing; \
      rm -rf /var/lib/apt/lists/*; \
    fi; \
    install -d -o zookeeper -g zookeeper /var/lib/zookeeper/data
COPY docker/zookeeper-server /usr/local/bin/
USER zookeeper
WORKDIR /var/lib/zookeeper
EXPOSE 2181 2888 3888
HEALTHCHECK --interval=2s --timeout=3s --start-period=30s --retries=3 CMD ["zookeeper-server", "--check"]
CMD ["zookeeper-server"]
