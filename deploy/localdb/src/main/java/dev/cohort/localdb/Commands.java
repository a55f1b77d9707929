package dev.cohort.localdb;

import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.locks.Lock;
import java.util.concurrent.locks.ReentrantReadWriteLock;

import de.bwaldvogel.mongo.bson.Document;
import de.bwaldvogel.mongo.exception.MongoServerError;
import de.bwaldvogel.mongo.exception.MongoServerException;
import io.netty.channel.Channel;

/**
 * What LocalDb adds in front of mongo-java-server's command handling, for both backends.
 *
 * <ul>
 * <li>{@code hello} is answered as {@code isMaster} (with {@code isWritablePrimary}), as
 * MongoDB 4.4.2+ does. The library refuses it, so every new connection of the C driver cost
 * a refused command, a fallback round trip and a stack trace in localdb.log (1.3 MB in five
 * minutes of tests).</li>
 * <li>A command the server refuses (a drop of a missing collection, a duplicate key...) is
 * answered with MongoDB's error document ({@code ok: 0, errmsg, code, codeName}), as before,
 * but logged as one line instead of an ERROR with a stack trace: the client got the error, and
 * it is no fault of the server. Unexpected exceptions (the library's own bugs) are logged in
 * full and answered as MongoDB's InternalError (code 1) whose errmsg names the command and the
 * exception's class: the library's handler answered "Unknown error: null" for one without a
 * message (a ConcurrentModificationException).</li>
 * <li>A read ({@code find}, {@code count}, {@code distinct}, an {@code aggregate} without
 * {@code $out} or {@code $merge}) that fails with such a fault is run again, alone: no write
 * runs beside the second attempt (writes share {@link #WRITING}; the retry holds it
 * exclusively). The library sorts live documents that concurrent writes change under it: an
 * aggregate with a {@code $sort} failed with TimSort's "Comparison method violates its general
 * contract!" in 64 of 166 runs while two clients updated the sort keys (the primary's minute
 * measure failed so in a benchmark), and 5 of 177 still did with five plain attempts. MongoDB
 * never fails a read because writes ran beside it, and a read has no effect to repeat. Reads
 * that succeed at once, and writes, run side by side as before.</li>
 * <li>An empty {@code getMore} on a cursor that stays open (a change stream's) is held until a
 * write to its collection could have given it an event, or until its {@code maxTimeMS} (1 s
 * without one) passes, as MongoDB holds a tailable awaitData cursor. The library answers it at
 * once, which turned a change stream into a poll: an idle node sent a getMore per tick. A held
 * getMore asks the backend again at once after an insert into its collection (or a drop or
 * rename of it, or of its database), and at most every 250 ms after updates and deletes
 * there, so that a burst of claims does not wake every node's held getMore per claim. Each
 * look reads only the oplog entries of its collection after its cursor's position
 * ({@link OplogIndex}), not the whole oplog. {@code --no-hold-getmore} (or
 * {@code LOCALDB_HOLD_GETMORE=0}) answers at once again, as the library does: what
 * {@code cohortctl doctor} must warn about.</li>
 * </ul>
 *
 * Holding blocks only the connection that asked: getMores run on threads of their own
 * ({@link LocalServer}).
 */
final class Commands {

    /** The backend's own handleCommand (super::handleCommand of the subclass). */
    interface Next {
        Document handle(Channel channel, String database, String command, Document query);
    }

    /** Writes that give a change stream an event it must deliver at once. */
    private static final Set<String> URGENT = Set.of("insert", "drop", "renamecollection");
    /** Writes whose events (updates, deletes) a held getMore picks up within LAZY_MS. */
    private static final Set<String> LAZY = Set.of("update", "delete", "findandmodify");
    /** After updates and deletes, a held getMore looks at most this often. */
    private static final long LAZY_MS = 250;
    private static final long DEFAULT_AWAIT_MS = 1000;
    /** A read that fails with a fault of the library is tried this often in all, the
     * attempts after the first alone. */
    static final int READ_ATTEMPTS = 3;
    /** Writes hold it shared; a read's attempt after a fault holds it exclusively. */
    private static final ReentrantReadWriteLock WRITING = new ReentrantReadWriteLock();
    private static final Set<String> READS = Set.of("find", "count", "distinct", "aggregate");

    private static volatile boolean holdGetMore = true;
    /** Where a change stream's getMore reads the oplog from (null: the library's full scan). */
    private static volatile OplogIndex oplogIndex;
    /** Writes per "database.collection": [0] urgent, [1] lazy; "*" counts dropDatabase. */
    private static final Map<String, long[]> WRITES = new HashMap<>();
    private static final Object WRITTEN = new Object(); // guards WRITES; notified on urgent ones

    private Commands() {
    }

    static void holdGetMore(boolean hold) {
        holdGetMore = hold;
    }

    static void oplogIndex(OplogIndex index) {
        oplogIndex = index;
    }

    private static void written(String database, String command, Document query) {
        String name = command.toLowerCase(Locale.ROOT);
        boolean urgent = URGENT.contains(name) || "dropdatabase".equals(name);
        if (!urgent && !LAZY.contains(name)) {
            return;
        }
        Object collection = query.get(command);
        String ns = "dropdatabase".equals(name) ? "*"
                : database + "." + (collection instanceof String c ? c : "");
        synchronized (WRITTEN) {
            WRITES.computeIfAbsent(ns, k -> new long[2])[urgent ? 0 : 1]++;
            if (urgent) {
                WRITTEN.notifyAll();
            }
        }
    }

    /** The write counts a held getMore on `ns` compares: its own, and dropDatabase's. */
    private static long[] seen(String ns) {
        long[] own = WRITES.getOrDefault(ns, new long[2]);
        long[] all = WRITES.getOrDefault("*", new long[2]);
        return new long[] {own[0] + all[0], own[1]};
    }

    /** True for a getMore reply whose batch is empty on a cursor that stays open. */
    private static boolean emptyAndOpen(Document reply) {
        if (!(reply.get("cursor") instanceof Document cursor)) {
            return false;
        }
        Object id = cursor.get("id");
        Object batch = cursor.get("nextBatch");
        return id instanceof Number n && n.longValue() != 0 && batch instanceof List<?> l
                && l.isEmpty();
    }

    /**
     * getMore, held while its batch is empty and its await time lasts (see above): it looks
     * again at once after an insert into its collection (or a drop), and at most every LAZY_MS
     * after updates and deletes there.
     */
    private static Document getMore(Channel channel, String database, Document query, Next next) {
        long awaitMs = query.get("maxTimeMS") instanceof Number n && n.longValue() > 0
                ? n.longValue() : DEFAULT_AWAIT_MS;
        long deadline = System.nanoTime() + awaitMs * 1_000_000L;
        String ns = database + "." + query.get("collection");
        while (true) {
            long[] before;
            synchronized (WRITTEN) {
                before = seen(ns);
            }
            OplogIndex index = oplogIndex;
            Document reply = index == null || !(query.get("getMore") instanceof Number id)
                    ? next.handle(channel, database, "getMore", query)
                    : index.reading(ns, id.longValue(),
                            () -> next.handle(channel, database, "getMore", query));
            if (!holdGetMore || !emptyAndOpen(reply) || !channel.isActive()) {
                return reply;
            }
            synchronized (WRITTEN) {
                if (!awaitWrite(ns, before, deadline)) {
                    return reply; // the await time passed with nothing written there
                }
            }
        }
    }

    /**
     * Waits (holding WRITTEN) until `ns` had an urgent write since `before` (true at once), an
     * update or delete LAZY_MS ago (true), or the deadline passed (true only if something was
     * written there meanwhile, so that the caller looks once more).
     */
    private static boolean awaitWrite(String ns, long[] before, long deadline) {
        while (true) {
            long[] now = seen(ns);
            if (now[0] != before[0]) {
                return true;
            }
            long left = deadline - System.nanoTime();
            if (left <= 0) {
                return now[1] != before[1];
            }
            boolean lazy = now[1] != before[1];
            long wait = lazy ? Math.min(left, LAZY_MS * 1_000_000L) : left;
            try {
                WRITTEN.wait(Math.max(1, wait / 1_000_000L));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return false;
            }
            if (lazy) {
                return true;
            }
        }
    }

    /** True for a command that only reads: one that may run again after a fault. */
    private static boolean readOnly(String command, Document query) {
        String name = command.toLowerCase(Locale.ROOT);
        if (!READS.contains(name)) {
            return false;
        }
        if (!"aggregate".equals(name)) {
            return true;
        }
        if (!(query.get("pipeline") instanceof List<?> pipeline)) {
            return false;
        }
        for (Object stage : pipeline) {
            if (!(stage instanceof Document d) || d.containsKey("$out") || d.containsKey("$merge")) {
                return false;
            }
        }
        return true;
    }

    /** A read, run again alone while the library fails it with a fault of its own (see
     * above). */
    private static Document read(Channel channel, String database, String command,
            Document query, Next next) {
        for (int attempt = 1;; attempt++) {
            Lock alone = attempt > 1 ? WRITING.writeLock() : null;
            if (alone != null) {
                alone.lock();
            }
            try {
                return next.handle(channel, database, command, query);
            } catch (MongoServerException e) {
                throw e;
            } catch (RuntimeException e) {
                if (attempt >= READ_ATTEMPTS) {
                    throw e;
                }
                System.err.println("cohort-localdb: " + command + " on " + database
                        + " failed (" + e.getClass().getSimpleName() + "), attempt " + attempt
                        + " of " + READ_ATTEMPTS + ": running it again with writes held back");
            } finally {
                if (alone != null) {
                    alone.unlock();
                }
            }
        }
    }

    /** True for a command that changes documents a read may be sorting. */
    private static boolean writes(String command) {
        String name = command.toLowerCase(Locale.ROOT);
        return URGENT.contains(name) || LAZY.contains(name) || "dropdatabase".equals(name);
    }

    static Document handle(Channel channel, String database, String command, Document query,
            Next next) {
        try {
            if ("hello".equalsIgnoreCase(command)) {
                Document reply = next.handle(channel, database, "isMaster", query);
                reply.put("isWritablePrimary", reply.getOrDefault("ismaster", Boolean.TRUE));
                return reply;
            }
            if ("getMore".equalsIgnoreCase(command)) {
                return getMore(channel, database, query, next);
            }
            if (readOnly(command, query)) {
                return read(channel, database, command, query, next);
            }
            Document reply;
            if (writes(command)) {
                WRITING.readLock().lock();
                try {
                    reply = next.handle(channel, database, command, query);
                } finally {
                    WRITING.readLock().unlock();
                }
            } else {
                reply = next.handle(channel, database, command, query);
            }
            written(database, command, query);
            return reply;
        } catch (MongoServerException e) {
            Document error = new Document();
            error.put("$err", e.getMessageWithoutErrorCode());
            error.put("errmsg", e.getMessageWithoutErrorCode());
            if (e instanceof MongoServerError serverError) {
                error.put("code", serverError.getCode());
                error.putIfNotNull("codeName", serverError.getCodeName());
            }
            error.put("ok", 0);
            System.err.println("cohort-localdb: " + command + " on " + database + " refused: "
                    + e.getMessageWithoutErrorCode());
            return error;
        } catch (RuntimeException e) {
            // The library's own fault (a ConcurrentModificationException...): its handler would
            // answer "Unknown error: " + a message that is often null. Answer MongoDB's
            // InternalError naming the exception, and log it in full as before.
            System.err.println("cohort-localdb: " + command + " on " + database + " failed:");
            e.printStackTrace();
            Document error = new Document();
            String what = e.getClass().getName()
                    + (e.getMessage() != null ? ": " + e.getMessage() : "");
            error.put("errmsg", "the embedded server failed the " + command + ": " + what);
            error.put("code", 1);
            error.put("codeName", "InternalError");
            error.put("ok", 0);
            return error;
        }
    }
}
