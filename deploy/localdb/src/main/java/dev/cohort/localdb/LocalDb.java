package dev.cohort.localdb;

import java.io.IOException;
import java.io.PrintStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Instant;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

import de.bwaldvogel.mongo.MongoBackend;
import de.bwaldvogel.mongo.MongoCollection;
import de.bwaldvogel.mongo.MongoDatabase;
import de.bwaldvogel.mongo.backend.AbstractMongoBackend;
import de.bwaldvogel.mongo.bson.BsonTimestamp;
import de.bwaldvogel.mongo.bson.Document;
import de.bwaldvogel.mongo.backend.h2.H2Backend;
import de.bwaldvogel.mongo.backend.memory.MemoryBackend;
import de.bwaldvogel.mongo.oplog.Oplog;
import io.netty.channel.Channel;

/**
 * Local MongoDB-compatible server for Cohort development and tests
 * (de.bwaldvogel:mongo-java-server).
 *
 * <pre>
 * java -cp 'target/classes:target/lib/*' dev.cohort.localdb.LocalDb \
 *     [--host 127.0.0.1] [--port 0] [--port-file PATH] [--h2 FILE] [--oplog]
 *     [--no-hold-getmore]
 * </pre>
 *
 * <ul>
 * <li>{@code --host}: address to bind (default 127.0.0.1).</li>
 * <li>{@code --port}: port to bind; 0 (default) picks a free port.</li>
 * <li>{@code --port-file}: once bound, the actual port is written there
 * atomically (temp file + rename); the file is removed on clean shutdown.</li>
 * <li>{@code --h2}: keep data in an H2 MVStore file (survives restarts)
 * instead of memory. Data is flushed by the MVStore background writer
 * (~1 s) and on clean shutdown; a SIGKILL may lose the last writes.</li>
 * <li>{@code --oplog}: enable mongo-java-server's oplog emulation
 * (needed only for change streams). Its oplog is a plain collection, read
 * through {@link OplogIndex}; entries older than
 * {@code LOCALDB_OPLOG_WINDOW_S} seconds (default 600) are removed every
 * 10 s, as a replica set's capped oplog drops its oldest entries.</li>
 * <li>{@code --no-hold-getmore} (or {@code LOCALDB_HOLD_GETMORE=0}): answer an empty
 * change-stream getMore at once, as mongo-java-server does, instead of holding it as MongoDB
 * does (see {@link Commands}).</li>
 * </ul>
 *
 * Prints exactly one line to stdout once bound:
 * {@code cohort-localdb listening on HOST:PORT}. Stops cleanly on
 * SIGTERM/SIGINT. Exit codes: 0 ok, 1 startup failure, 2 usage error.
 */
public final class LocalDb {

    private LocalDb() {
    }

    public static void main(String[] args) {
        String host = "127.0.0.1";
        int port = 0;
        Path portFile = null;
        Path h2File = null;
        boolean oplog = false;
        boolean hold = !"0".equals(System.getenv("LOCALDB_HOLD_GETMORE"));

        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            switch (a) {
                case "--host" -> host = value(args, ++i, a);
                case "--port" -> {
                    String v = value(args, ++i, a);
                    try {
                        port = Integer.parseInt(v);
                    } catch (NumberFormatException e) {
                        port = -1;
                    }
                    if (port < 0 || port > 65535) {
                        usage("invalid --port: " + v);
                    }
                }
                case "--port-file" -> portFile = Paths.get(value(args, ++i, a)).toAbsolutePath();
                case "--h2" -> h2File = Paths.get(value(args, ++i, a)).toAbsolutePath();
                case "--oplog" -> oplog = true;
                case "--no-hold-getmore" -> hold = false;
                case "-h", "--help" -> {
                    printUsage(System.out);
                    System.exit(0);
                }
                default -> usage("unknown argument: " + a);
            }
        }

        OplogIndex index = new OplogIndex();
        MongoBackend backend;
        try {
            if (h2File != null) {
                Path dir = h2File.getParent();
                if (dir != null) {
                    Files.createDirectories(dir);
                }
                backend = new H2Backend(h2File.toString()) {
                    @Override
                    public Document handleCommand(Channel channel, String database,
                            String command, Document query) {
                        return Commands.handle(channel, database, command, query,
                                super::handleCommand);
                    }

                    @Override
                    protected Oplog createOplog() {
                        return index.createOplog(this, getCursorRegistry());
                    }
                };
            } else {
                backend = new MemoryBackend() {
                    @Override
                    public Document handleCommand(Channel channel, String database,
                            String command, Document query) {
                        return Commands.handle(channel, database, command, query,
                                super::handleCommand);
                    }

                    @Override
                    protected Oplog createOplog() {
                        return index.createOplog(this, getCursorRegistry());
                    }
                };
            }
        } catch (Exception e) {
            fail("cannot open backend" + (h2File != null ? " " + h2File : "") + ": " + e);
            return;
        }

        Commands.holdGetMore(hold);
        Commands.oplogIndex(index);
        LocalServer server = new LocalServer(backend);
        if (oplog) {
            server.enableOplog();
            trimOplog(backend, index);
        }
        InetSocketAddress bound;
        try {
            bound = server.bind(host, port);
        } catch (Exception e) {
            closeQuietly(server);
            fail("cannot bind " + host + ":" + port + ": " + e);
            return;
        }

        CountDownLatch stopped = new CountDownLatch(1);
        final Path pf = portFile;
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                server.shutdownNow();
            } catch (RuntimeException e) {
                System.err.println("cohort-localdb: error during shutdown: " + e);
            } finally {
                if (pf != null) {
                    try {
                        Files.deleteIfExists(pf);
                    } catch (IOException ignored) {
                        // best effort
                    }
                }
                stopped.countDown();
            }
        }, "cohort-localdb-shutdown"));

        if (portFile != null) {
            try {
                writeAtomically(portFile, bound.getPort() + "\n");
            } catch (IOException e) {
                fail("cannot write port file " + portFile + ": " + e);
            }
        }

        System.out.println("cohort-localdb listening on " + host + ":" + bound.getPort());
        System.out.flush();

        try {
            stopped.await();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** Removes the oplog's entries older than the window every 10 s (daemon thread). */
    private static void trimOplog(MongoBackend backend, OplogIndex index) {
        long windowS = 600;
        String env = System.getenv("LOCALDB_OPLOG_WINDOW_S");
        if (env != null && !env.isEmpty()) {
            try {
                windowS = Long.parseLong(env);
            } catch (NumberFormatException e) {
                fail("invalid LOCALDB_OPLOG_WINDOW_S: " + env);
            }
        }
        final long window = windowS;
        ScheduledExecutorService timer = Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, "cohort-localdb-oplog-trim");
            t.setDaemon(true);
            return t;
        });
        timer.scheduleWithFixedDelay(() -> {
            try {
                MongoDatabase local = ((AbstractMongoBackend) backend).resolveDatabase("local");
                MongoCollection<?> log = local.resolveCollection("oplog.rs", false);
                BsonTimestamp before = new BsonTimestamp(Instant.now().minusSeconds(window), 0);
                index.trim(before);
                if (log != null) {
                    log.deleteDocuments(new Document("ts", new Document("$lt", before)), 0);
                }
            } catch (RuntimeException e) {
                System.err.println("cohort-localdb: cannot trim the oplog: " + e);
            }
        }, 10, 10, TimeUnit.SECONDS);
    }

    private static void writeAtomically(Path target, String content) throws IOException {
        Path dir = target.getParent();
        if (dir != null) {
            Files.createDirectories(dir);
        }
        Path tmp = Files.createTempFile(dir, "." + target.getFileName() + ".", ".tmp");
        try {
            Files.write(tmp, content.getBytes(StandardCharsets.US_ASCII));
            try {
                Files.setPosixFilePermissions(tmp, PosixFilePermissions.fromString("rw-r--r--"));
            } catch (UnsupportedOperationException ignored) {
                // non-POSIX file system: keep the default
            }
            try {
                Files.move(tmp, target, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
            } catch (AtomicMoveNotSupportedException e) {
                Files.move(tmp, target, StandardCopyOption.REPLACE_EXISTING);
            }
        } finally {
            Files.deleteIfExists(tmp);
        }
    }

    private static void closeQuietly(LocalServer server) {
        try {
            server.shutdownNow();
        } catch (RuntimeException ignored) {
            // already failing
        }
    }

    private static String value(String[] args, int i, String flag) {
        if (i >= args.length) {
            usage("missing value for " + flag);
        }
        return args[i];
    }

    private static void fail(String msg) {
        System.err.println("cohort-localdb: " + msg);
        System.exit(1);
    }

    private static void usage(String msg) {
        System.err.println("cohort-localdb: " + msg);
        printUsage(System.err);
        System.exit(2);
    }

    private static void printUsage(PrintStream out) {
        out.println("usage: LocalDb [--host ADDR] [--port N] [--port-file PATH] [--h2 FILE] [--oplog]"
                + " [--no-hold-getmore]");
    }
}
