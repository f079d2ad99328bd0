// RespClient.java — a minimal Redis client on plain sockets (RESP2), so RedisLimiter needs no
// library (Debian packages neither Jedis nor Lettuce). One command at a time per connection, no
// pipelining; a small pool of idle connections reused across threads.
// URL: redis://[[user]:password@]host[:port][/db] (AUTH and SELECT on connect); rediss:// is the
// same over TLS (the JVM's default SSLContext, or one given: a private CA), the server's name
// checked against its certificate (HTTPS rules: the URL's host must be in its SAN). Sentinel
// and Cluster are not handled here: give RedisLimiter your own client (RedisCommands).
// Timeouts: `timeout` bounds the connect and every read (SO_TIMEOUT). A connection that failed
// mid-command (timeout, reset, garbage) is closed, never reused: its next reply could be the
// late answer to the failed command. An error reply leaves the connection in step, so it is
// reused, and throws RedisError.
// Thread-safety: execute may be called from any number of threads; each call holds its own
// connection for its duration.
package dev.ratelimit.client;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.URI;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedDeque;
import java.util.concurrent.atomic.AtomicInteger;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLParameters;
import javax.net.ssl.SSLSocket;

public final class RespClient implements RedisCommands, AutoCloseable {
  private static final int MAX_IDLE = 16;
  private static final long MAX_BULK = 512L * 1024 * 1024;
  private final String host;
  private final int port;
  private final String user, password;
  private final int db;
  private final int timeoutMs;
  private final SSLContext tls;  // null: plain TCP
  private final ConcurrentLinkedDeque<Conn> idle = new ConcurrentLinkedDeque<>();
  private final AtomicInteger idleCount = new AtomicInteger();
  private volatile boolean closed;

  /** `url` as redis://[[user]:password@]host[:port][/db] or rediss://… (TLS with the JVM's
   *  default trust); `timeout` bounds connect, TLS handshake and reads. */
  public RespClient(String url, Duration timeout) { this(url, timeout, null); }

  /** As above; a rediss:// URL uses `tls` (e.g. one trusting a private CA) when not null. */
  public RespClient(String url, Duration timeout, SSLContext tls) {
    URI u;
    try {
      u = URI.create(url);
    } catch (IllegalArgumentException e) {
      throw new RateLimitException("invalid_request", "not a Redis URL: " + url);
    }
    if (!("redis".equals(u.getScheme()) || "rediss".equals(u.getScheme())) || u.getHost() == null) {
      throw new RateLimitException("invalid_request", "Redis URL must be redis[s]://host[:port][/db], got " + url
          + " (Sentinel and Cluster: pass your own client as RedisCommands)");
    }
    try {
      this.tls = "rediss".equals(u.getScheme()) ? (tls != null ? tls : SSLContext.getDefault()) : null;
    } catch (java.security.NoSuchAlgorithmException e) {
      throw new RateLimitException("invalid_request", "no TLS in this JVM: " + e.getMessage());
    }
    host = u.getHost();
    port = u.getPort() < 0 ? 6379 : u.getPort();
    String info = u.getRawUserInfo();
    String us = null, pw = null;
    if (info != null) {
      int colon = info.indexOf(':');
      us = colon < 0 ? null : URLDecoder.decode(info.substring(0, colon), StandardCharsets.UTF_8);
      pw = URLDecoder.decode(colon < 0 ? info : info.substring(colon + 1), StandardCharsets.UTF_8);
      if (us != null && us.isEmpty()) us = null;
    }
    user = us;
    password = pw;
    String path = u.getPath() == null ? "" : u.getPath().replaceAll("^/+", "");
    try {
      db = path.isEmpty() ? 0 : Integer.parseInt(path);
    } catch (NumberFormatException e) {
      throw new RateLimitException("invalid_request", "Redis URL's database must be a number, got " + path);
    }
    long ms = timeout.toMillis();
    if (ms <= 0 || ms > Integer.MAX_VALUE) throw new RateLimitException("invalid_request", "timeout must be at least 1 ms, got " + timeout);
    timeoutMs = (int) ms;
  }

  @Override
  public Object execute(byte[]... args) throws IOException {
    if (closed) throw new IOException("RespClient is closed");
    Conn c = idle.pollFirst();
    if (c != null) idleCount.decrementAndGet();
    else c = open();
    Object reply;
    try {
      c.write(args);
      reply = c.read();
    } catch (IOException | RuntimeException e) {
      c.close();
      throw e instanceof IOException io ? io : new IOException(e.getMessage(), e);
    }
    if (closed || idleCount.incrementAndGet() > MAX_IDLE) {
      idleCount.decrementAndGet();
      c.close();
    } else {
      idle.addFirst(c);
    }
    if (reply instanceof RedisError e) throw new RedisError(e.getMessage());
    return reply;
  }

  /** Runs one command given as text arguments (tests and tools). */
  public Object execute(String... args) throws IOException {
    byte[][] b = new byte[args.length][];
    for (int i = 0; i < args.length; i++) b[i] = args[i].getBytes(StandardCharsets.UTF_8);
    return execute(b);
  }

  /** Closes the idle connections; calls in progress close theirs when they end. */
  @Override
  public void close() {
    closed = true;
    for (Conn c; (c = idle.pollFirst()) != null; ) c.close();
  }

  private Conn open() throws IOException {
    Socket s = new Socket();
    Socket plain = s;
    try {
      s.setTcpNoDelay(true);
      s.setSoTimeout(timeoutMs);
      s.connect(new InetSocketAddress(host, port), timeoutMs);
      if (tls != null) s = handshake(s);
      Conn c = new Conn(s);
      if (password != null) c.command(user == null ? new String[] {"AUTH", password} : new String[] {"AUTH", user, password});
      if (db != 0) c.command("SELECT", Integer.toString(db));
      return c;
    } catch (IOException | RuntimeException e) {
      s.close();
      plain.close();
      throw e;
    }
  }

  /** TLS over the connected socket, the host name checked as HTTPS checks it, within the timeout. */
  private Socket handshake(Socket plain) throws IOException {
    SSLSocket t = (SSLSocket) tls.getSocketFactory().createSocket(plain, host, port, true);
    SSLParameters p = t.getSSLParameters();
    p.setEndpointIdentificationAlgorithm("HTTPS");
    t.setSSLParameters(p);
    t.setSoTimeout(timeoutMs);
    t.startHandshake();
    return t;
  }

  private static final class Conn {
    private final Socket socket;
    private final InputStream in;
    private final OutputStream out;

    Conn(Socket s) throws IOException {
      socket = s;
      in = new BufferedInputStream(s.getInputStream(), 16384);
      out = new BufferedOutputStream(s.getOutputStream(), 16384);
    }

    /** A setup command (AUTH, SELECT): an error reply fails the connection. */
    void command(String... args) throws IOException {
      byte[][] b = new byte[args.length][];
      for (int i = 0; i < args.length; i++) b[i] = args[i].getBytes(StandardCharsets.UTF_8);
      write(b);
      if (read() instanceof RedisError e) throw new IOException("Redis refused " + args[0] + ": " + e.getMessage());
    }

    void write(byte[][] args) throws IOException {
      out.write(('*' + Integer.toString(args.length) + "\r\n").getBytes(StandardCharsets.US_ASCII));
      for (byte[] a : args) {
        out.write(('$' + Integer.toString(a.length) + "\r\n").getBytes(StandardCharsets.US_ASCII));
        out.write(a);
        out.write('\r');
        out.write('\n');
      }
      out.flush();
    }

    /** One RESP2 reply; an error reply comes back as a RedisError value (at any depth). */
    Object read() throws IOException {
      int type = in.read();
      if (type < 0) throw new EOFException("Redis closed the connection");
      String line = line();
      switch (type) {
        case '+': return line;
        case '-': return new RedisError(line);
        case ':': return parseLong(line);
        case '$': {
          long n = parseLong(line);
          if (n < 0) return null;
          if (n > MAX_BULK) throw new IOException("bulk reply of " + n + " bytes");
          byte[] b = in.readNBytes((int) n);
          if (b.length != n || in.read() != '\r' || in.read() != '\n') throw new EOFException("truncated bulk reply");
          return b;
        }
        case '*': {
          long n = parseLong(line);
          if (n < 0) return null;
          List<Object> out = new ArrayList<>((int) Math.min(n, 1024));
          for (long i = 0; i < n; i++) out.add(read());
          return out;
        }
        default: throw new IOException("not a RESP2 reply (type byte " + type + ")");
      }
    }

    private String line() throws IOException {
      StringBuilder b = new StringBuilder();
      while (true) {
        int c = in.read();
        if (c < 0) throw new EOFException("Redis closed the connection");
        if (c == '\r') {
          if (in.read() != '\n') throw new IOException("malformed RESP line");
          return b.toString();
        }
        b.append((char) c);
      }
    }

    private static long parseLong(String s) throws IOException {
      try {
        return Long.parseLong(s);
      } catch (NumberFormatException e) {
        throw new IOException("malformed RESP integer: " + s);
      }
    }

    void close() {
      try {
        socket.close();
      } catch (IOException ignored) {
        // closing: nothing to do
      }
    }
  }
}
