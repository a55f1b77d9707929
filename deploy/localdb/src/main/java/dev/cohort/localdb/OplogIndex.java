package dev.cohort.localdb;

import java.lang.reflect.Field;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentNavigableMap;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.function.Supplier;
import java.util.stream.Stream;

import de.bwaldvogel.mongo.MongoBackend;
import de.bwaldvogel.mongo.MongoCollection;
import de.bwaldvogel.mongo.MongoDatabase;
import de.bwaldvogel.mongo.backend.Cursor;
import de.bwaldvogel.mongo.backend.CursorRegistry;
import de.bwaldvogel.mongo.bson.BsonTimestamp;
import de.bwaldvogel.mongo.bson.Document;
import de.bwaldvogel.mongo.oplog.CollectionBackedOplog;
import de.bwaldvogel.mongo.oplog.Oplog;
import de.bwaldvogel.mongo.oplog.OplogCursor;
import de.bwaldvogel.mongo.oplog.OplogPosition;

/**
 * An index of the emulated oplog by namespace and timestamp, so that a change stream's getMore
 * reads only its namespace's entries after its cursor's position, as MongoDB reads its oplog
 * from a position, instead of the whole oplog.
 *
 * <p>mongo-java-server keeps its oplog as a plain collection ({@code local.oplog.rs}) and each
 * change-stream getMore scans all of it ({@code queryAllAsStream}), then keeps the entries of
 * the stream's namespace after the cursor's position. A held getMore (see {@link Commands})
 * looks again after each insert into its collection, so with a large oplog and many open
 * streams an insert cost streams × oplog size. The library's oplog is built here on a view of
 * that collection which also keeps each entry in a sorted map per namespace; while
 * {@link #reading} runs a getMore, the view answers {@code queryAllAsStream} with only the
 * entries of the cursor's namespace (and of its database's {@code $cmd}, where drops are
 * written) at or after the cursor's position. The library then filters and sorts them as
 * before, so the events and their order do not change; anything unexpected (a cursor that is
 * not the library's oplog cursor, a field it renamed) falls back to the full scan.
 *
 * <p>Entries leave the index when {@link #trim} drops them from the collection too.
 */
final class OplogIndex {

    /** What a getMore on this thread may read: its namespace and first timestamp. */
    private record Reading(String ns, String commands, long from) {
    }

    private static final ThreadLocal<Reading> READING = new ThreadLocal<>();
    /** OplogCursor's position (no getter in 1.46); null if the library renamed it. */
    private static final Field POSITION = positionField();

    private final Map<String, ConcurrentSkipListMap<Long, Document>> byNamespace =
            new ConcurrentHashMap<>();
    private volatile CursorRegistry cursors; // set once, before the server binds

    /** The library's oplog for `backend`, built on the indexed view of local.oplog.rs. */
    @SuppressWarnings("unchecked")
    Oplog createOplog(MongoBackend backend, CursorRegistry registry) {
        MongoDatabase local = backend.resolveDatabase("local");
        MongoCollection<Document> log =
                (MongoCollection<Document>) local.resolveCollection("oplog.rs", false);
        if (log == null) {
            log = (MongoCollection<Document>) local.createCollectionOrThrowIfExists("oplog.rs");
        }
        log.queryAllAsStream().forEach(this::add); // entries an H2 file kept
        cursors = registry;
        return new CollectionBackedOplog(backend, view(log), registry);
    }

    /**
     * Runs `getMore` (a getMore of cursor `cursorId` on "database.collection" `ns`) reading only
     * the index's entries from the cursor's position; the full scan if that position is unknown.
     */
    <T> T reading(String ns, long cursorId, Supplier<T> getMore) {
        Long from = position(cursorId);
        if (from == null) {
            return getMore.get();
        }
        int dot = ns.indexOf('.');
        String commands = (dot < 0 ? ns : ns.substring(0, dot)) + ".$cmd";
        READING.set(new Reading(ns, commands, from));
        try {
            return getMore.get();
        } finally {
            READING.remove();
        }
    }

    /** Drops the entries before `before` from the index (the caller drops them from the log). */
    void trim(BsonTimestamp before) {
        for (ConcurrentSkipListMap<Long, Document> entries : byNamespace.values()) {
            entries.headMap(before.getValue()).clear();
        }
    }

    private Long position(long cursorId) {
        if (cursors == null || POSITION == null) {
            return null;
        }
        try {
            Cursor cursor = cursors.getCursor(cursorId);
            if (cursor instanceof OplogCursor
                    && POSITION.get(cursor) instanceof OplogPosition position) {
                return Long.parseLong(position.toHexString(), 16);
            }
        } catch (RuntimeException | IllegalAccessException e) {
            // no such cursor (the library answers that), or not readable: the full scan
        }
        return null;
    }

    private static Field positionField() {
        try {
            Field field = OplogCursor.class.getDeclaredField("position");
            field.setAccessible(true);
            return field;
        } catch (ReflectiveOperationException | RuntimeException e) {
            System.err.println("cohort-localdb: change streams scan the whole oplog: " + e);
            return null;
        }
    }

    private void add(Document entry) {
        if (entry.get("ts") instanceof BsonTimestamp ts && entry.get("ns") instanceof String ns) {
            byNamespace.computeIfAbsent(ns, k -> new ConcurrentSkipListMap<>())
                    .put(ts.getValue(), entry);
        }
    }

    private Stream<Document> entries(Reading reading) {
        return Stream.of(reading.ns(), reading.commands()).flatMap(ns -> {
            ConcurrentSkipListMap<Long, Document> entries = byNamespace.get(ns);
            if (entries == null) {
                return Stream.empty();
            }
            ConcurrentNavigableMap<Long, Document> tail = entries.tailMap(reading.from(), true);
            return tail.values().stream();
        });
    }

    /**
     * `log` seen through the index: writes also go to the index (before the collection, so a
     * reader that sees an entry in the collection finds it in the index); queryAllAsStream
     * during {@link #reading} reads the index.
     */
    @SuppressWarnings("unchecked")
    private MongoCollection<Document> view(MongoCollection<Document> log) {
        InvocationHandler handler = (proxy, method, args) -> {
            switch (method.getName()) {
                case "addDocument" -> add((Document) args[0]);
                case "addDocuments" -> {
                    List<Document> entries = ((Stream<Document>) args[0]).toList();
                    entries.forEach(this::add);
                    args = new Object[] {entries.stream()};
                }
                case "queryAllAsStream" -> {
                    Reading reading = READING.get();
                    if (reading != null) {
                        return entries(reading);
                    }
                }
                default -> {
                }
            }
            return call(method, log, args);
        };
        return (MongoCollection<Document>) Proxy.newProxyInstance(
                MongoCollection.class.getClassLoader(), new Class<?>[] {MongoCollection.class},
                handler);
    }

    private static Object call(Method method, Object target, Object[] args) throws Throwable {
        try {
            return method.invoke(target, args);
        } catch (InvocationTargetException e) {
            throw e.getCause();
        }
    }
}
