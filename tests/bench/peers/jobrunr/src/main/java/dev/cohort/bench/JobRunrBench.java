/*
 * JobRunrBench.java - JobRunr with its MongoDB storage provider running no-op jobs, for
 * tests/bench/peers.sh.
 *
 *   JobRunrBench enqueue --database DB --tasks N
 *   JobRunrBench work --database DB --tasks N --since-ms MS [--workers W] [--poll-ms I]
 *   JobRunrBench versions
 *
 * enqueue: creates JobRunr's collections and indexes with its own migrations (its default,
 * DatabaseOptions.CREATE), then N jobs through JobRunr's bulk enqueue (BackgroundJob.enqueue
 * of a stream, which saves them in batches), with no background job server. Not timed. It
 * prints "schema=migrations", or "schema=workaround" when migration M007 failed on the
 * local server (see createSchema) and its indexes were made here instead.
 * work: starts a BackgroundJobServer with JobRunr's standard configuration
 * (usingStandardBackgroundJobServerConfiguration: its default worker count, availableProcessors
 * x 8 on platform threads, unless W > 0; its default 15 s poll interval, which does not pace
 * this run, since a worker that goes idle fetches new work at once), polls the number of
 * SUCCEEDED jobs every I ms (default 100, like tests/bench/probe), and when all N have
 * succeeded prints
 *
 *   jobrunr tasks=N seconds=S tasks_per_s=R active_seconds=A active_tasks_per_s=RA
 *       commands=K workers=W
 *
 * seconds runs from MS (this host's clock, ms since the epoch, taken by peers.sh just before
 * it started this JVM) to the last job's SUCCEEDED state; active_seconds from the first job's
 * PROCESSING state to that. commands counts the MongoDB commands the JVM sent from the
 * server's start until all had succeeded, the polling's included.
 * The work phase opens the storage with DatabaseOptions.SKIP_CREATE (JobRunr's option for a
 * schema made beforehand): the enqueue phase made it.
 * versions: prints "jobrunr=X mongodb_driver=Y java=Z".
 *
 * MONGODB_URI names the server. Any error (the server's included) goes to stderr with a
 * non-zero exit status.
 */
package dev.cohort.bench;

import com.mongodb.ConnectionString;
import com.mongodb.MongoClientSettings;
import com.mongodb.MongoCommandException;
import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoClients;
import com.mongodb.client.MongoCollection;
import com.mongodb.client.model.Filters;
import com.mongodb.client.model.IndexOptions;
import com.mongodb.client.model.Indexes;
import com.mongodb.event.CommandListener;
import com.mongodb.event.CommandStartedEvent;
import com.mongodb.internal.build.MongoDriverVersion;
import java.time.Instant;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.IntStream;
import org.bson.Document;
import org.bson.UuidRepresentation;
import org.jobrunr.configuration.JobRunr;
import org.jobrunr.jobs.Job;
import org.jobrunr.jobs.states.JobState;
import org.jobrunr.jobs.states.StateName;
import org.jobrunr.scheduling.BackgroundJob;
import org.jobrunr.server.BackgroundJobServer;
import org.jobrunr.server.BackgroundJobServerConfiguration;
import org.jobrunr.storage.Paging;
import org.jobrunr.storage.StorageProvider;
import org.jobrunr.storage.StorageProviderUtils.DatabaseOptions;
import org.jobrunr.storage.StorageProviderUtils.Jobs;
import org.jobrunr.storage.nosql.mongo.MongoDBStorageProvider;

public final class JobRunrBench {
    private static final AtomicLong COMMANDS = new AtomicLong();

    private JobRunrBench() {
    }

    public static void main(String[] args) {
        try {
            if (args.length == 1 && args[0].equals("versions")) {
                versions();
            } else if (args.length > 0 && args[0].equals("enqueue")) {
                enqueue(options(args));
            } else if (args.length > 0 && args[0].equals("work")) {
                work(options(args));
            } else {
                throw new IllegalArgumentException("usage: JobRunrBench enqueue|work|versions ...");
            }
        } catch (Exception e) {
            // The innermost cause first: where the server refused, that is the server's error.
            Throwable root = e;
            while (root.getCause() != null) {
                root = root.getCause();
            }
            System.err.println("jobrunr bench: " + root);
            for (Throwable t = e; t != root; t = t.getCause()) {
                System.err.println("  under: " + t);
            }
            System.exit(1);
        }
        System.exit(0); // JobRunr's and the driver's threads are not daemons
    }

    private static Map<String, String> options(String[] args) {
        Map<String, String> opts = new HashMap<>(Map.of("--workers", "0", "--poll-ms", "100"));
        for (int i = 1; i < args.length; i += 2) {
            if (i + 1 >= args.length || !args[i].startsWith("--")) {
                throw new IllegalArgumentException("bad argument '" + args[i] + "'");
            }
            opts.put(args[i], args[i + 1]);
        }
        for (String required : List.of("--database", "--tasks")) {
            if (!opts.containsKey(required)) {
                throw new IllegalArgumentException(required + " is required");
            }
        }
        return opts;
    }

    private static int number(Map<String, String> opts, String key) {
        return Integer.parseInt(opts.get(key));
    }

    /** A client of MONGODB_URI as JobRunr's MongoDB page sets it up, its commands counted. */
    private static MongoClient client() {
        String uri = System.getenv("MONGODB_URI");
        if (uri == null || uri.isEmpty()) {
            throw new IllegalStateException("MONGODB_URI is not set");
        }
        CommandListener counter = new CommandListener() {
            @Override
            public void commandStarted(CommandStartedEvent event) {
                COMMANDS.incrementAndGet();
            }
        };
        return MongoClients.create(MongoClientSettings.builder()
                .applyConnectionString(new ConnectionString(uri))
                .uuidRepresentation(UuidRepresentation.STANDARD)
                .addCommandListener(counter)
                .build());
    }

    /** The storage provider on a schema made beforehand by createSchema. */
    private static StorageProvider storage(String database) {
        return new MongoDBStorageProvider(client(), database, DatabaseOptions.SKIP_CREATE);
    }

    /**
     * JobRunr's collections and indexes, made by its migrations; returns "migrations", or
     * "workaround" when migration M007 failed because the server cannot drop all of a
     * collection's indexes at once: mongo-java-server 1.46 answers dropIndexes with index "*"
     * by dropping every index of the whole database by name from this one collection, so it
     * fails with IndexNotFound (27) on the first index of another collection. M007 then is
     * done here as JobRunr does it, dropping the jobs collection's indexes one by one.
     */
    private static String createSchema(String database) {
        MongoClient client = client();
        try {
            new MongoDBStorageProvider(client, database, DatabaseOptions.CREATE);
            return "migrations";
        } catch (RuntimeException e) {
            MongoCommandException cause = dropIndexesFailure(e);
            if (cause == null) {
                throw e;
            }
            System.err.println("jobrunr bench note: JobRunr's migration M007 failed here ("
                    + cause.getErrorCodeName() + ": " + cause.getErrorMessage()
                    + "); replacing the jobs indexes one by one instead");
            replaceJobIndexes(client.getDatabase(database).getCollection(Jobs.NAME));
            return "workaround";
        }
    }

    /** The server's IndexNotFound error under a failed M007, or null for any other failure. */
    private static MongoCommandException dropIndexesFailure(Throwable e) {
        boolean inM007 = false;
        for (Throwable t = e; t != null; t = t.getCause()) {
            inM007 |= String.valueOf(t.getMessage()).contains("M007_");
            if (inM007 && t instanceof MongoCommandException
                    && ((MongoCommandException) t).getErrorCode() == 27) {
                return (MongoCommandException) t;
            }
        }
        return null;
    }

    /** Migration M007 (JobRunr 8): the jobs collection's earlier indexes replaced by four. */
    private static void replaceJobIndexes(MongoCollection<Document> jobs) {
        for (Document index : jobs.listIndexes()) {
            if (!index.getString("name").equals("_id_")) {
                jobs.dropIndex(index.getString("name"));
            }
        }
        jobs.createIndex(Indexes.compoundIndex(Indexes.ascending(Jobs.FIELD_STATE),
                        Indexes.ascending(Jobs.FIELD_RECURRING_JOB_ID)),
                new IndexOptions().name("recurringJobPartialIdx")
                        .partialFilterExpression(Filters.exists(Jobs.FIELD_RECURRING_JOB_ID)));
        jobs.createIndex(Indexes.compoundIndex(Indexes.ascending(Jobs.FIELD_STATE),
                        Indexes.ascending(Jobs.FIELD_SCHEDULED_AT)),
                new IndexOptions().name("scheduledPartialIdx").partialFilterExpression(
                        Filters.eq(Jobs.FIELD_STATE, StateName.SCHEDULED.name())));
        jobs.createIndex(Indexes.compoundIndex(Indexes.ascending(Jobs.FIELD_STATE),
                        Indexes.ascending(Jobs.FIELD_UPDATED_AT)),
                new IndexOptions().name("jobsByStateUpdatedAtAscIdx"));
        jobs.createIndex(Indexes.compoundIndex(Indexes.ascending(Jobs.FIELD_STATE),
                        Indexes.descending(Jobs.FIELD_UPDATED_AT)),
                new IndexOptions().name("jobsByStateUpdatedAtDescIdx"));
    }

    private static void enqueue(Map<String, String> opts) {
        System.out.println("schema=" + createSchema(opts.get("--database")));
        JobRunr.configure().useStorageProvider(storage(opts.get("--database"))).initialize();
        BackgroundJob.enqueue(IntStream.range(0, number(opts, "--tasks")).boxed(),
                i -> NoopJob.run());
    }

    private static void work(Map<String, String> opts) throws InterruptedException {
        int tasks = number(opts, "--tasks");
        int workers = number(opts, "--workers");
        long sinceMs = Long.parseLong(opts.get("--since-ms"));
        StorageProvider storage = storage(opts.get("--database"));
        BackgroundJobServerConfiguration config =
                BackgroundJobServerConfiguration.usingStandardBackgroundJobServerConfiguration();
        if (workers > 0) {
            config.andWorkerCount(workers);
        }
        long commandsBefore = COMMANDS.get();
        JobRunr.configure().useStorageProvider(storage).useBackgroundJobServer(config).initialize();
        BackgroundJobServer server = JobRunr.getBackgroundJobServer();
        long failed = 0;
        while (storage.countJobs(StateName.SUCCEEDED) < tasks) {
            failed = storage.countJobs(StateName.FAILED);
            if (failed > 0) {
                throw new IllegalStateException(failed + " jobs FAILED; see JobRunr's log");
            }
            Thread.sleep(number(opts, "--poll-ms"));
        }
        long commands = COMMANDS.get() - commandsBefore;
        int workerCount = server.getWorkDistributionStrategy().getWorkerCount();
        server.stop();
        Instant[] span = processingSpan(storage, tasks);
        double seconds = (span[1].toEpochMilli() - sinceMs) / 1000.0;
        double active = (span[1].toEpochMilli() - span[0].toEpochMilli()) / 1000.0;
        System.out.printf("jobrunr tasks=%d seconds=%.3f tasks_per_s=%.1f active_seconds=%.3f"
                        + " active_tasks_per_s=%.1f commands=%d workers=%d%n", tasks, seconds,
                tasks / seconds, active, tasks / active, commands, workerCount);
        JobRunr.destroy();
    }

    /** The first PROCESSING and the last SUCCEEDED instant over the succeeded jobs. */
    private static Instant[] processingSpan(StorageProvider storage, int tasks) {
        Instant first = Instant.MAX;
        Instant last = Instant.MIN;
        List<Job> jobs = storage.getJobList(StateName.SUCCEEDED,
                Paging.AmountBasedList.ascOnUpdatedAt(tasks));
        for (Job job : jobs) {
            for (JobState state : job.getJobStates()) {
                Instant at = state.getCreatedAt();
                if (state.getName() == StateName.PROCESSING && at.isBefore(first)) {
                    first = at;
                }
                if (state.getName() == StateName.SUCCEEDED && at.isAfter(last)) {
                    last = at;
                }
            }
        }
        if (jobs.size() != tasks) {
            throw new IllegalStateException(
                    jobs.size() + " SUCCEEDED jobs read back, expected " + tasks);
        }
        return new Instant[] {first, last};
    }

    private static void versions() {
        System.out.printf("jobrunr=%s mongodb_driver=%s java=%s%n",
                JobRunr.class.getPackage().getImplementationVersion(),
                MongoDriverVersion.VERSION,
                System.getProperty("java.version"));
    }
}
