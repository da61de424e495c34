package bench.spring.jdbc;

import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Locale;

import org.junit.jupiter.api.Test;

import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.jdbc.core.JdbcTemplate;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * One HTTP/1.1 connection serves any number of requests: Tomcat's default maxKeepAliveRequests (100)
 * would answer the 100th with {@code Connection: close}; the app sets it to unlimited, as Netty and
 * Vert.x are.
 */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
class KeepAliveTest {

    private static final int REQUESTS = 300;

    @LocalServerPort
    int port;

    @Autowired
    JdbcTemplate jdbc;

    @Test
    void oneConnectionServesEveryRequest() throws Exception {
        List<String> emails = jdbc.queryForList("SELECT email FROM users ORDER BY email LIMIT 50", String.class);
        try (Socket socket = new Socket("127.0.0.1", port)) {
            socket.setSoTimeout(5000);
            socket.setTcpNoDelay(true);
            OutputStream out = socket.getOutputStream();
            InputStream in = socket.getInputStream();
            for (int i = 0; i < REQUESTS; i++) {
                out.write(("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "
                        + TestTokens.valid(emails.get(i % emails.size())) + "\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
                out.flush();
                String head = readHead(in).toLowerCase(Locale.ROOT);
                assertThat(head).as("request %d", i).startsWith("http/1.1 200 ");
                assertThat(head).as("request %d", i).doesNotContain("connection: close");
                assertThat(readBody(head, in)).as("request %d", i).startsWith("{\"email\":");
            }
        }
    }

    private static String readHead(InputStream in) throws Exception {
        return readUntil(in, "\r\n\r\n");
    }

    /** The body after {@code head}: Content-Length bytes, or the chunks of a chunked body. */
    private static String readBody(String head, InputStream in) throws Exception {
        if (head.contains("content-length:")) {
            int length = Integer.parseInt(head.replaceAll("(?s).*content-length: *(\\d+).*", "$1"));
            return new String(in.readNBytes(length), StandardCharsets.UTF_8);
        }
        assertThat(head).contains("transfer-encoding: chunked");
        ByteArrayOutputStream body = new ByteArrayOutputStream();
        while (true) {
            int size = Integer.parseInt(readUntil(in, "\r\n").strip(), 16);
            if (size == 0) {
                readUntil(in, "\r\n"); // no trailers
                return body.toString(StandardCharsets.UTF_8);
            }
            body.write(in.readNBytes(size));
            readUntil(in, "\r\n");
        }
    }

    private static String readUntil(InputStream in, String end) throws Exception {
        ByteArrayOutputStream read = new ByteArrayOutputStream();
        while (!read.toString(StandardCharsets.US_ASCII).endsWith(end)) {
            int b = in.read();
            assertThat(b).as("connection closed by the server").isNotNegative();
            read.write(b);
        }
        return read.toString(StandardCharsets.US_ASCII);
    }
}
