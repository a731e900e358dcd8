package io.ruvio;

import java.net.URI;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import javax.net.ssl.SSLSocketFactory;

/**
 * Connection options of a {@link RuvioClient}. Immutable; build one with {@link #builder()} or parse a
 * {@code redis://} / {@code rediss://} URI with {@link #fromUri(String)}.
 *
 * <pre>{@code
 * var opts = ClientOptions.builder()
 *         .host("127.0.0.1").port(6379)
 *         .password("secret").database(2).clientName("billing-worker")
 *         .connectTimeout(Duration.ofSeconds(2)).commandTimeout(Duration.ofSeconds(2))
 *         .build();
 * try (var c = RuvioClient.connect(opts)) { ... }
 * }</pre>
 */
public final class ClientOptions {
    private final String host;
    private final int port;
    private final String username;
    private final String password;
    private final int database;
    private final String clientName;
    private final Duration connectTimeout;
    private final Duration commandTimeout;
    private final boolean tls;
    private final SSLSocketFactory sslSocketFactory;
    private final boolean verifyHostname;
    private final int protocol;
    private final Integer durabilityReplicas;
    private final List<String> sentinels;
    private final String serviceName;
    private final String sentinelPassword;
    private final int maxIdleConnections;

    private ClientOptions(Builder b) {
        this.host = b.host;
        this.port = b.port;
        this.username = b.username;
        this.password = b.password;
        this.database = b.database;
        this.clientName = b.clientName;
        this.connectTimeout = b.connectTimeout;
        this.commandTimeout = b.commandTimeout;
        this.tls = b.tls;
        this.sslSocketFactory = b.sslSocketFactory;
        this.verifyHostname = b.verifyHostname;
        this.protocol = b.protocol;
        this.durabilityReplicas = b.durabilityReplicas;
        this.sentinels = List.copyOf(b.sentinels);
        this.serviceName = b.serviceName;
        this.sentinelPassword = b.sentinelPassword;
        this.maxIdleConnections = b.maxIdleConnections;
    }

    /**
     * A new builder with the defaults: 127.0.0.1:6379, database 0, RESP3 (falling back to RESP2), connect and
     * command timeouts of 5 seconds, no TLS.
     *
     * @return a builder
     */
    public static Builder builder() {
        return new Builder();
    }

    /**
     * Parses {@code redis://[[username:]password@]host[:port][/database]} or the same with {@code rediss://} (TLS).
     * Query parameters {@code protocol=2|3}, {@code clientName=...}, {@code timeout=<ms>} (command timeout) and
     * {@code connectTimeout=<ms>} are understood too.
     *
     * @param uri the URI
     * @return the options
     * @throws IllegalArgumentException when the URI is not a redis/rediss URI
     */
    public static ClientOptions fromUri(String uri) {
        return builder().uri(uri).build();
    }

    /**
     * Returns the server host (ignored when sentinels are given).
     *
     * @return the server host (ignored when sentinels are given)
     */
    public String host() {
        return host;
    }

    /**
     * Returns the server port.
     *
     * @return the server port
     */
    public int port() {
        return port;
    }

    /**
     * Returns the user name for AUTH, or {@code null} for the default user.
     *
     * @return the user name for AUTH, or {@code null} for the default user
     */
    public String username() {
        return username;
    }

    /**
     * Returns the password for AUTH, or {@code null} for none.
     *
     * @return the password for AUTH, or {@code null} for none
     */
    public String password() {
        return password;
    }

    /**
     * Returns the database selected on every connection.
     *
     * @return the database selected on every connection
     */
    public int database() {
        return database;
    }

    /**
     * Returns the client name set on every connection, or {@code null}.
     *
     * @return the client name set on every connection, or {@code null}
     */
    public String clientName() {
        return clientName;
    }

    /**
     * Returns how long opening a connection (TCP, TLS and handshake) may take.
     *
     * @return how long opening a connection (TCP, TLS and handshake) may take
     */
    public Duration connectTimeout() {
        return connectTimeout;
    }

    /**
     * Returns how long a command may wait for its reply (the waiting forms add their wait).
     *
     * @return how long a command may wait for its reply (the waiting forms add their wait)
     */
    public Duration commandTimeout() {
        return commandTimeout;
    }

    /**
     * Returns whether connections use TLS.
     *
     * @return whether connections use TLS
     */
    public boolean tls() {
        return tls;
    }

    /**
     * Returns the TLS socket factory, or {@code null} for the JVM default.
     *
     * @return the TLS socket factory, or {@code null} for the JVM default
     */
    public SSLSocketFactory sslSocketFactory() {
        return sslSocketFactory;
    }

    /**
     * Returns whether the TLS server certificate must match the host name.
     *
     * @return whether the TLS server certificate must match the host name
     */
    public boolean verifyHostname() {
        return verifyHostname;
    }

    /**
     * Returns the preferred RESP version: 3 (HELLO 3, falling back to RESP2 when refused) or 2.
     *
     * @return the preferred RESP version: 3 (HELLO 3, falling back to RESP2 when refused) or 2
     */
    public int protocol() {
        return protocol;
    }

    /**
     * Returns n for {@code CLIENT DURABILITY REPLICAS n} on every connection, or {@code null} to send nothing.
     *
     * @return n for {@code CLIENT DURABILITY REPLICAS n} on every connection, or {@code null} to send nothing
     */
    public Integer durabilityReplicas() {
        return durabilityReplicas;
    }

    /**
     * Returns the Sentinel-protocol discovery addresses ({@code host:port}); empty for a direct connection.
     *
     * @return the Sentinel-protocol discovery addresses ({@code host:port}); empty for a direct connection
     */
    public List<String> sentinels() {
        return sentinels;
    }

    /**
     * Returns the service (master) name asked of the sentinels.
     *
     * @return the service (master) name asked of the sentinels
     */
    public String serviceName() {
        return serviceName;
    }

    /**
     * Returns the password for the sentinels, or {@code null}.
     *
     * @return the password for the sentinels, or {@code null}
     */
    public String sentinelPassword() {
        return sentinelPassword;
    }

    /**
     * Returns how many idle dedicated connections (for waiting forms and transactions) are kept open.
     *
     * @return how many idle dedicated connections (for waiting forms and transactions) are kept open
     */
    public int maxIdleConnections() {
        return maxIdleConnections;
    }

    /** Builds {@link ClientOptions}. Not thread-safe. */
    public static final class Builder {
        private String host = "127.0.0.1";
        private int port = 6379;
        private String username;
        private String password;
        private int database;
        private String clientName;
        private Duration connectTimeout = Duration.ofSeconds(5);
        private Duration commandTimeout = Duration.ofSeconds(5);
        private boolean tls;
        private SSLSocketFactory sslSocketFactory;
        private boolean verifyHostname = true;
        private int protocol = 3;
        private Integer durabilityReplicas;
        private final List<String> sentinels = new ArrayList<>();
        private String serviceName;
        private String sentinelPassword;
        private int maxIdleConnections = 8;

        private Builder() {
        }

        /**
         * Sets the fields found in a {@code redis://} or {@code rediss://} URI (see {@link ClientOptions#fromUri}).
         *
         * @param uri the URI
         * @return this builder
         */
        public Builder uri(String uri) {
            URI u = URI.create(uri);
            String scheme = u.getScheme();
            if (!"redis".equals(scheme) && !"rediss".equals(scheme)) {
                throw new IllegalArgumentException("expected a redis:// or rediss:// URI, got " + uri);
            }
            tls = "rediss".equals(scheme);
            if (u.getHost() != null) {
                host = u.getHost();
            }
            if (u.getPort() > 0) {
                port = u.getPort();
            }
            String info = u.getRawUserInfo();
            if (info != null && !info.isEmpty()) {
                int colon = info.indexOf(':');
                if (colon < 0) {
                    password = decode(info);
                } else {
                    String user = decode(info.substring(0, colon));
                    username = user.isEmpty() ? null : user;
                    password = decode(info.substring(colon + 1));
                }
            }
            String path = u.getPath();
            if (path != null && path.length() > 1) {
                database = Integer.parseInt(path.substring(1));
            }
            String q = u.getRawQuery();
            if (q != null) {
                for (String kv : q.split("&")) {
                    int eq = kv.indexOf('=');
                    if (eq < 0) {
                        continue;
                    }
                    String k = kv.substring(0, eq);
                    String v = decode(kv.substring(eq + 1));
                    switch (k) {
                        case "protocol" -> protocol(Integer.parseInt(v));
                        case "clientName", "client_name", "name" -> clientName = v;
                        case "timeout" -> commandTimeout = Duration.ofMillis(Long.parseLong(v));
                        case "connectTimeout" -> connectTimeout = Duration.ofMillis(Long.parseLong(v));
                        case "db", "database" -> database = Integer.parseInt(v);
                        default -> throw new IllegalArgumentException("unknown URI option " + k);
                    }
                }
            }
            return this;
        }

        private static String decode(String s) {
            return URLDecoder.decode(s, StandardCharsets.UTF_8);
        }

        /**
         * Sets the server host.
         *
         * @param host the server host
         * @return this builder
         */
        public Builder host(String host) {
            this.host = Objects.requireNonNull(host);
            return this;
        }

        /**
         * Sets the server port.
         *
         * @param port the server port
         * @return this builder
         */
        public Builder port(int port) {
            this.port = port;
            return this;
        }

        /**
         * Sets the ACL user name (null for the default user).
         *
         * @param username the ACL user name (null for the default user)
         * @return this builder
         */
        public Builder username(String username) {
            this.username = username;
            return this;
        }

        /**
         * Sets the password (null for none).
         *
         * @param password the password (null for none)
         * @return this builder
         */
        public Builder password(String password) {
            this.password = password;
            return this;
        }

        /**
         * Sets the database index selected on every connection.
         *
         * @param database the database index selected on every connection
         * @return this builder
         */
        public Builder database(int database) {
            this.database = database;
            return this;
        }

        /**
         * Sets the name set on every connection (null for none).
         *
         * @param clientName the name set on every connection (null for none)
         * @return this builder
         */
        public Builder clientName(String clientName) {
            this.clientName = clientName;
            return this;
        }

        /**
         * Sets how long opening a connection may take.
         *
         * @param t how long opening a connection may take
         * @return this builder
         */
        public Builder connectTimeout(Duration t) {
            this.connectTimeout = Objects.requireNonNull(t);
            return this;
        }

        /**
         * Sets how long a command may wait for its reply.
         *
         * @param t how long a command may wait for its reply
         * @return this builder
         */
        public Builder commandTimeout(Duration t) {
            this.commandTimeout = Objects.requireNonNull(t);
            return this;
        }

        /**
         * Sets whether to use TLS.
         *
         * @param tls whether to use TLS
         * @return this builder
         */
        public Builder tls(boolean tls) {
            this.tls = tls;
            return this;
        }

        /**
         * Sets the TLS socket factory (for a custom trust store or client certificate) and turns TLS on.
         *
         * @param factory the factory, e.g. {@code sslContext.getSocketFactory()}
         * @return this builder
         */
        public Builder sslSocketFactory(SSLSocketFactory factory) {
            this.sslSocketFactory = factory;
            this.tls = true;
            return this;
        }

        /**
         * Sets whether the TLS certificate must match the host name (default true).
         *
         * @param verify whether the TLS certificate must match the host name (default true)
         * @return this builder
         */
        public Builder verifyHostname(boolean verify) {
            this.verifyHostname = verify;
            return this;
        }

        /**
         * Sets the RESP version: 3 (the default: {@code HELLO 3}, falling back to RESP2 when the server refuses) or 2.
         *
         * @param protocol 2 or 3
         * @return this builder
         */
        public Builder protocol(int protocol) {
            if (protocol != 2 && protocol != 3) {
                throw new IllegalArgumentException("protocol must be 2 or 3");
            }
            this.protocol = protocol;
            return this;
        }

        /**
         * Sends {@code CLIENT DURABILITY REPLICAS n} on every connection the client opens, so lock grants are only
         * answered once n replicas hold them. A server that does not support it makes the connection fail with its
         * error (a {@link RuvioServerException}).
         *
         * @param n the number of replicas, or {@code null} to send nothing (the default)
         * @return this builder
         */
        public Builder durabilityReplicas(Integer n) {
            this.durabilityReplicas = n;
            return this;
        }

        /**
         * Finds the primary through the Sentinel protocol instead of connecting to {@link #host}/{@link #port}.
         *
         * @param serviceName the name the sentinels (or Ruvio coordinators) know the service by
         * @param addresses their addresses as {@code host:port}
         * @return this builder
         */
        public Builder sentinels(String serviceName, List<String> addresses) {
            this.serviceName = Objects.requireNonNull(serviceName);
            this.sentinels.clear();
            this.sentinels.addAll(addresses);
            return this;
        }

        /**
         * Sets the sentinels' password (null for none).
         *
         * @param password the sentinels' password (null for none)
         * @return this builder
         */
        public Builder sentinelPassword(String password) {
            this.sentinelPassword = password;
            return this;
        }

        /**
         * Sets how many idle dedicated connections to keep (default 8).
         *
         * @param n how many idle dedicated connections to keep (default 8)
         * @return this builder
         */
        public Builder maxIdleConnections(int n) {
            this.maxIdleConnections = n;
            return this;
        }

        /**
         * Returns the options.
         *
         * @return the options
         */
        public ClientOptions build() {
            return new ClientOptions(this);
        }
    }
}
