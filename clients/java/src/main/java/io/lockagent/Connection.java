package io.lockagent;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;

/**
 * One Unix socket to the agent, multiplexed by tag: callers {@link #send} requests from any
 * thread, one reader thread routes each final reply to its call and each push to the
 * {@link Pushes}, one writer thread writes the lines. No caller's thread touches the channel: an
 * interrupt during a channel write would close it (it is an InterruptibleChannel), and with it
 * release every hold of the connection.
 */
final class Connection {
    /** Where pushes go, from the reader thread. They must not block. */
    interface Pushes {
        void push(List<String> words);

        void closed();
    }

    /** One request: its reply, and {@code then}, which sees the reply in the reader before any later line. */
    static final class Call {
        final String tag;
        final CompletableFuture<Reply> reply = new CompletableFuture<>();
        final List<Map<String, String>> data = new ArrayList<>();
        final Consumer<Reply> then;

        Call(String tag, Consumer<Reply> then) {
            this.tag = tag;
            this.then = then;
        }
    }

    private static final String STOP = "";

    private final SocketChannel channel;
    private final Pushes pushes;
    private final LinkedBlockingQueue<String> outbox = new LinkedBlockingQueue<>();
    private final AtomicLong nextTag = new AtomicLong();
    private final Object mu = new Object();
    private final Map<String, Call> calls = new HashMap<>(); // under mu
    private String closedBecause; // under mu; set once the connection is gone
    private final CompletableFuture<Void> closed = new CompletableFuture<>();

    Connection(Path path, Pushes pushes) throws IOException {
        this.channel = SocketChannel.open(UnixDomainSocketAddress.of(path));
        this.pushes = pushes;
        start("lockagent-reader", this::read);
        start("lockagent-writer", this::write);
    }

    private static void start(String name, Runnable r) {
        Thread t = new Thread(r, name);
        t.setDaemon(true);
        t.start();
    }

    /** Registers a request and queues its line; the reply comes to the call. */
    Call send(String line, Consumer<Reply> then) {
        Call call = new Call(Long.toString(nextTag.incrementAndGet()), then);
        synchronized (mu) {
            if (closedBecause != null) {
                throw new ConnectionClosedException(closedBecause);
            }
            calls.put(call.tag, call);
        }
        outbox.add(call.tag + " " + line + "\n");
        return call;
    }

    Call send(String line) {
        return send(line, null);
    }

    /** Waits for a call's reply, whatever interrupts come meanwhile (they are kept for the caller). */
    static Reply await(Call call) {
        boolean interrupted = false;
        try {
            while (true) {
                try {
                    return awaitInterruptibly(call);
                } catch (InterruptedException e) {
                    interrupted = true;
                }
            }
        } finally {
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }

    static Reply awaitInterruptibly(Call call) throws InterruptedException {
        try {
            return call.reply.get();
        } catch (ExecutionException e) {
            throw (RuntimeException) e.getCause();
        }
    }

    /** The reply, or null when none came within the timeout. */
    static Reply await(Call call, long millis) {
        try {
            return call.reply.get(millis, TimeUnit.MILLISECONDS);
        } catch (ExecutionException e) {
            throw (RuntimeException) e.getCause();
        } catch (TimeoutException e) {
            return null;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return null;
        }
    }

    Reply call(String line) {
        return await(send(line));
    }

    CompletableFuture<Void> closed() {
        return closed;
    }

    /**
     * Whether the connection is closed: true from the moment calls fail with
     * ConnectionClosedException (the reader tells the holds' losses before it completes
     * {@link #closed()}, so a caller that saw a loss or a failed call must see it closed).
     */
    boolean isClosed() {
        synchronized (mu) {
            return closedBecause != null;
        }
    }

    /**
     * Says QUIT and waits, up to grace, for the agent to release and close the connection; then
     * closes the socket (if the agent has not). Returns once the reader has ended every call and hold.
     */
    void quit(Duration grace) {
        long deadline = System.nanoTime() + grace.toNanos();
        boolean interrupted = false;
        try {
            Reply r = send("QUIT").reply.get(grace.toNanos(), TimeUnit.NANOSECONDS);
            if ("OK".equals(r.kind)) {
                closed.get(Math.max(deadline - System.nanoTime(), 0), TimeUnit.NANOSECONDS);
            }
        } catch (InterruptedException e) {
            interrupted = true;
        } catch (ConnectionClosedException | ExecutionException | TimeoutException e) {
            // closed already, or the agent did not answer in time: close it here
        }
        close();
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
    }

    /** Closes the socket; the reader then ends every call and hold. Returns once it has. */
    void close() {
        try {
            channel.close();
        } catch (IOException ignored) {
            // closing is all we wanted
        }
        closed.join();
    }

    private void write() {
        try {
            while (true) {
                String line = outbox.take();
                if (line.equals(STOP)) {
                    return;
                }
                ByteBuffer b = ByteBuffer.wrap(line.getBytes(StandardCharsets.UTF_8));
                while (b.hasRemaining()) {
                    channel.write(b);
                }
            }
        } catch (IOException | InterruptedException e) {
            // Part of a line may have been written: the stream is unusable.
            try {
                channel.close();
            } catch (IOException ignored) {
                // the reader ends the connection
            }
        }
    }

    private void read() {
        ByteBuffer buf = ByteBuffer.allocate(64 * 1024);
        ByteArrayOutputStream line = new ByteArrayOutputStream();
        String why = "the agent closed the connection";
        try {
            while (channel.read(buf) >= 0) {
                buf.flip();
                while (buf.hasRemaining()) {
                    byte b = buf.get();
                    if (b != '\n') {
                        line.write(b);
                        continue;
                    }
                    String s = line.toString(StandardCharsets.UTF_8);
                    line.reset();
                    route(s.endsWith("\r") ? s.substring(0, s.length() - 1) : s);
                }
                buf.clear();
            }
        } catch (IOException e) {
            why = channel.isOpen() ? e.toString() : "closed by the client";
        } finally {
            shutdown(why);
        }
    }

    /** Fails every pending call and tells the pushes; the agent has released every hold. */
    private void shutdown(String why) {
        List<Call> pending;
        synchronized (mu) {
            closedBecause = why;
            pending = new ArrayList<>(calls.values());
            calls.clear();
        }
        try {
            channel.close();
        } catch (IOException ignored) {
            // gone either way
        }
        outbox.add(STOP);
        pushes.closed();
        for (Call c : pending) {
            c.reply.completeExceptionally(new ConnectionClosedException(why));
        }
        closed.complete(null);
    }

    private void route(String line) {
        List<String> words = Reply.words(line);
        if (words.size() < 2) {
            return;
        }
        if (words.get(0).equals("*")) {
            pushes.push(words.subList(1, words.size()));
            return;
        }
        Call call;
        synchronized (mu) {
            call = calls.get(words.get(0));
            if (call == null) {
                return;
            }
            if (words.get(1).equals("DATA")) {
                call.data.add(data(words));
                return;
            }
            calls.remove(call.tag);
        }
        Reply r = new Reply(words.subList(1, words.size()), call.data);
        if (call.then != null) {
            call.then.accept(r);
        }
        call.reply.complete(r);
    }

    /** A DATA line's fields; a first word without '=' (WHO's "DATA waiting ...") is under "". */
    private static Map<String, String> data(List<String> words) {
        Map<String, String> f = Reply.fields(words.subList(2, words.size()));
        if (words.size() > 2 && !words.get(2).contains("=")) {
            f.put("", words.get(2));
        }
        return f;
    }
}
