# The ZooKeeper image of the compose ensemble (docs/docker.md): Debian's zookeeper package, run
# as its user `zookeeper` by docker/zookeeper-server, HEALTHCHECK on the server's mode. Like
# docker/Dockerfile it installs only the packages its base lacks, so it builds without network
# from the base `scripts/compose-demo.sh --isolated` makes with debootstrap.
ARG BASE=debian:bookworm-slim

FROM ${BASE}
# Debian's ZooKeeper and a Java runtime (docker/packages/zookeeper), only what the base lacks.
# (The JRE's packages expect the manual directories a slim image leaves out.)
COPY docker/install-packages docker/packages/zookeeper /tmp/regent-build/
RUN mkdir -p /usr/share/man/man1 \
    && /tmp/regent-build/install-packages --clean -f /tmp/regent-build/zookeeper \
    && rm -rf /tmp/regent-build \
    && install -d -o zookeeper -g zookeeper /var/lib/zookeeper/data
COPY docker/zookeeper-server /usr/local/bin/
USER zookeeper
WORKDIR /var/lib/zookeeper
EXPOSE 2181 2888 3888
HEALTHCHECK --interval=2s --timeout=3s --start-period=30s --retries=3 CMD ["zookeeper-server", "--check"]
CMD ["zookeeper-server"]
