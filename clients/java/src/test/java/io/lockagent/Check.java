package io.lockagent;

import java.time.Duration;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;

/** Assertions for the tests. */
final class Check {
    private Check() {}

    static void that(boolean ok, String what) {
        if (!ok) {
            throw new AssertionError(what);
        }
    }

    static void equal(Object want, Object got, String what) {
        if (want == null ? got != null : !want.equals(got)) {
            throw new AssertionError(what + ": want " + want + ", got " + got);
        }
    }

    /** Runs r and returns what it threw, which must be a T. */
    static <T extends Throwable> T throwsA(Class<T> type, ThrowingRunnable r, String what) {
        try {
            r.run();
        } catch (Throwable t) {
            if (type.isInstance(t)) {
                return type.cast(t);
            }
            throw new AssertionError(what + ": threw " + t + ", want a " + type.getSimpleName(), t);
        }
        throw new AssertionError(what + ": threw nothing, want a " + type.getSimpleName());
    }

    /** Polls cond (at once, then 1ms, 2ms, ... up to 20ms apart) until it holds or timeout passes. */
    static void eventually(Duration timeout, BooleanSupplier cond, Supplier<String> what) throws InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        for (long pause = 1; !cond.getAsBoolean(); pause = Math.min(2 * pause, 20)) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError(what.get());
            }
            Thread.sleep(pause); // a poll: what cond looks at sends no signal
        }
    }

    interface ThrowingRunnable {
        void run() throws Exception;
    }
}
