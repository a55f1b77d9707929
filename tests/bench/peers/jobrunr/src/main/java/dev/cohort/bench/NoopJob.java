/*
 * NoopJob.java - the job JobRunr runs in tests/bench/peers.sh: it does nothing, so the
 * benchmark measures JobRunr's own claiming and bookkeeping.
 */
package dev.cohort.bench;

public final class NoopJob {
    private NoopJob() {
    }

    /** The job: enqueued as a lambda calling this static method, as JobRunr's docs show. */
    public static void run() {
    }
}
