package io.lockagent;

import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * One LOCK request on its way: its holds are tracked before the line is sent (a LOST push racing
 * the reply finds them), and a caller that gives up (interrupted) cancels it at the agent and
 * releases a grant that won the race, so nothing stays held.
 */
final class Acquisition {
    /** How long giving up waits for the agent to answer the CANCEL and the LOCK. */
    private static final long CLEANUP_MILLIS = 5_000;

    private final LockAgentClient client;
    private final String line;
    final List<Hold> holds;
    private Connection.Call call;

    Acquisition(LockAgentClient client, String line, List<Hold> holds) {
        this.client = client;
        this.line = line;
        this.holds = holds;
    }

    void send() {
        holds.forEach(client::track);
        try {
            call = client.connection().send(line);
        } catch (RuntimeException e) {
            holds.forEach(client::untrack);
            throw e;
        }
    }

    /** Waits for the grant; an interrupt cancels the request and is rethrown once nothing is held. */
    void awaitInterruptibly() throws InterruptedException {
        Reply r;
        try {
            r = Connection.awaitInterruptibly(call);
        } catch (InterruptedException e) {
            abandon();
            throw e;
        }
        finish(r);
    }

    /** Waits for the grant whatever interrupts come (Lock.lock()). */
    void await() {
        finish(Connection.await(call));
    }

    private void finish(Reply r) {
        try {
            r.orThrow(holds.get(0).name());
        } catch (RuntimeException e) {
            holds.forEach(client::untrack);
            throw e;
        }
        grant(r.fields);
    }

    /** Spreads a grant (comma-separated fences, counts and slots for several names) over the holds. */
    private void grant(Map<String, String> f) {
        String[] fences = f.getOrDefault("fence", "").split(",");
        String[] counts = f.getOrDefault("count", "").split(",");
        String[] slots = f.getOrDefault("slot", "").split(",");
        for (int i = 0; i < holds.size(); i++) {
            Map<String, String> g = new HashMap<>();
            g.put("validity", f.get("validity"));
            g.put("fence", i < fences.length ? fences[i] : null);
            g.put("count", i < counts.length ? counts[i] : null);
            g.put("slot", i < slots.length ? slots[i] : null);
            holds.get(i).grant(g);
        }
    }

    /** CANCEL, then release what a grant that came first gave. */
    private void abandon() {
        try {
            client.connection().send("CANCEL " + call.tag);
            Reply r = Connection.await(call, CLEANUP_MILLIS);
            if (r != null && r.kind.equals("OK")) {
                grant(r.fields);
                for (Hold h : holds) {
                    h.unlock();
                }
            }
        } catch (LockAgentException e) {
            // The connection closed (the agent released everything) or a hold was lost meanwhile.
        } finally {
            holds.forEach(client::untrack);
        }
    }
}
