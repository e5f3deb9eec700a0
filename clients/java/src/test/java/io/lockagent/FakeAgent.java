package io.lockagent;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * Answers the protocol on a Unix socket from a script, and records every request but HELLO
 * and QUIT (without its tag): proof of what a client wrote, and of what it did not. HELLO is
 * answered OK; QUIT OK, then the connection closes (as the agent does; {@link #quits} counts
 * them); LOCK is granted (fence 7); everything else is OK.
 */
final class FakeAgent implements AutoCloseable {
    final String path;
    private final Path dir;
    private final ServerSocketChannel server;
    private final List<String> requests = new ArrayList<>();
    private final List<SocketChannel> conns = new ArrayList<>();
    final java.util.concurrent.atomic.AtomicInteger quits = new java.util.concurrent.atomic.AtomicInteger();

    FakeAgent() throws IOException {
        dir = Files.createTempDirectory(Path.of("/tmp"), "lagf");
        path = dir.resolve("fake.sock").toString();
        server = ServerSocketChannel.open(StandardProtocolFamily.UNIX);
        server.bind(UnixDomainSocketAddress.of(path));
        Thread t = new Thread(this::accept, "fake-agent");
        t.setDaemon(true);
        t.start();
    }

    List<String> requests() {
        synchronized (requests) {
            return new ArrayList<>(requests);
        }
    }

    private void accept() {
        try {
            while (true) {
                SocketChannel c = server.accept();
                synchronized (conns) {
                    conns.add(c);
                }
                Thread t = new Thread(() -> serve(c), "fake-agent-conn");
                t.setDaemon(true);
                t.start();
            }
        } catch (IOException e) {
            // closed
        }
    }

    private void serve(SocketChannel c) {
        ByteBuffer buf = ByteBuffer.allocate(8192);
        ByteArrayOutputStream line = new ByteArrayOutputStream();
        try {
            while (c.read(buf) >= 0) {
                buf.flip();
                while (buf.hasRemaining()) {
                    byte b = buf.get();
                    if (b == '\n') {
                        answer(c, line.toString(StandardCharsets.UTF_8));
                        line.reset();
                    } else {
                        line.write(b);
                    }
                }
                buf.clear();
            }
        } catch (IOException e) {
            // closed
        }
    }

    private void answer(SocketChannel c, String line) throws IOException {
        String[] words = line.trim().split(" +", 3);
        if (words.length < 2) {
            return;
        }
        String verb = words[1].toUpperCase();
        String reply;
        if (verb.equals("QUIT")) {
            quits.incrementAndGet();
            ByteBuffer ok = ByteBuffer.wrap((words[0] + " OK\n").getBytes(StandardCharsets.UTF_8));
            while (ok.hasRemaining()) {
                c.write(ok);
            }
            c.close();
            return;
        }
        if (verb.equals("HELLO")) {
            reply = "OK proto=1 agent=fake session=1 masters=3 quorum=2";
        } else {
            synchronized (requests) {
                requests.add(line.substring(line.indexOf(' ') + 1));
            }
            reply = verb.equals("LOCK") ? "OK fence=7 validity=1000 count=1" : verb.equals("UNLOCK") ? "OK count=0" : "OK";
        }
        ByteBuffer out = ByteBuffer.wrap((words[0] + " " + reply + "\n").getBytes(StandardCharsets.UTF_8));
        while (out.hasRemaining()) {
            c.write(out);
        }
    }

    @Override
    public void close() throws IOException {
        server.close();
        synchronized (conns) {
            for (SocketChannel c : conns) {
                c.close();
            }
        }
        Files.deleteIfExists(Path.of(path));
        Files.deleteIfExists(dir);
    }
}
