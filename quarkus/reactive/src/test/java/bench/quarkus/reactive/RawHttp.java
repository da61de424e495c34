package bench.quarkus.reactive;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;

import io.restassured.RestAssured;

/** One request written byte for byte, for request targets HTTP clients refuse to send (bad percent-encoding). */
final class RawHttp {

    private RawHttp() {
    }

    /** The status code of GET target with the given Authorization header. */
    static int status(String target, String authorization) throws IOException {
        try (Socket socket = new Socket("localhost", RestAssured.port)) {
            socket.setSoTimeout(10_000);
            OutputStream out = socket.getOutputStream();
            out.write(("GET " + target + " HTTP/1.1\r\nHost: localhost\r\nAuthorization: " + authorization
                    + "\r\nConnection: close\r\n\r\n").getBytes(StandardCharsets.ISO_8859_1));
            out.flush();
            InputStream in = socket.getInputStream();
            StringBuilder line = new StringBuilder();
            for (int c; (c = in.read()) != -1 && c != '\r';) {
                line.append((char) c);
            }
            // "HTTP/1.1 400 Bad Request"
            return Integer.parseInt(line.toString().split(" ")[1]);
        }
    }
}
