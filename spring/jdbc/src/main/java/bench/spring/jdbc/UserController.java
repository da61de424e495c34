package bench.spring.jdbc;

import java.util.List;
import java.util.Optional;

import jakarta.servlet.http.HttpServletRequest;

import org.springframework.http.HttpHeaders;
import org.springframework.http.HttpStatus;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.RestController;

@RestController
public class UserController {

    private static final ErrorBody INVALID_TOKEN = new ErrorBody("invalid_token");
    private static final ErrorBody INVALID_QUERIES = new ErrorBody("invalid_queries");
    private static final ErrorBody NOT_FOUND = new ErrorBody("not_found");

    private static final ErrorBody DOWNSTREAM = new ErrorBody("downstream");

    private final JwtVerifier jwtVerifier;
    private final UserRepository users;
    private final Downstream downstream;

    public UserController(JwtVerifier jwtVerifier, UserRepository users, Downstream downstream) {
        this.jwtVerifier = jwtVerifier;
        this.users = users;
        this.downstream = downstream;
    }

    /**
     * The token's user and K downstream items ({@code ?calls=K}, 1..10, default 3), fetched in parallel
     * ({@code ?mode=sequential}: one after another). 401 first, then 400, then the one lookup (404: no
     * downstream call), then the calls: any failure or timeout is 502 {@code {"error":"downstream"}}.
     */
    @GetMapping("/feed")
    public ResponseEntity<?> feed(@RequestHeader(name = HttpHeaders.AUTHORIZATION, required = false) String authorization,
                                  HttpServletRequest request) {
        Optional<String> email = jwtVerifier.email(authorization);
        if (email.isEmpty()) {
            return ResponseEntity.status(HttpStatus.UNAUTHORIZED)
                    .header(HttpHeaders.WWW_AUTHENTICATE, "Bearer error=\"invalid_token\"")
                    .body(INVALID_TOKEN);
        }
        String[] error = new String[1];
        FeedParameters params = FeedParameters.parse(request.getQueryString(), error);
        if (params == null) {
            return ResponseEntity.badRequest().body(new ErrorBody(error[0]));
        }
        Optional<User> user = users.findById(email.get());
        if (user.isEmpty()) {
            return ResponseEntity.status(HttpStatus.NOT_FOUND).body(NOT_FOUND);
        }
        try {
            List<Downstream.Item> items = params.sequential()
                    ? downstream.sequential(user.get().email(), params.calls())
                    : downstream.parallel(user.get().email(), params.calls());
            return ResponseEntity.ok(new Feed(user.get(), items));
        }
        catch (Downstream.DownstreamException ex) {
            return ResponseEntity.status(HttpStatus.BAD_GATEWAY).body(DOWNSTREAM);
        }
    }

    record Feed(User user, List<Downstream.Item> items) {
    }

    /**
     * The token's user. {@code ?queries=N} (1..20, default 1) looks the user up N times, one blocking
     * call after another, and returns the row once. The token is checked first: an invalid token is 401
     * whatever {@code queries} says.
     */
    @GetMapping("/")
    public ResponseEntity<?> me(@RequestHeader(name = HttpHeaders.AUTHORIZATION, required = false) String authorization,
                                HttpServletRequest request) {
        Optional<String> email = jwtVerifier.email(authorization);
        if (email.isEmpty()) {
            return ResponseEntity.status(HttpStatus.UNAUTHORIZED)
                    .header(HttpHeaders.WWW_AUTHENTICATE, "Bearer error=\"invalid_token\"")
                    .body(INVALID_TOKEN);
        }
        int queries = QueriesParameter.parse(request.getQueryString());
        if (queries == QueriesParameter.INVALID) {
            return ResponseEntity.badRequest().body(INVALID_QUERIES);
        }
        // No ORM, no cache: every findById is one SELECT on the wire.
        Optional<User> user = Optional.empty();
        for (int i = 0; i < queries; i++) {
            user = users.findById(email.get());
        }
        return user
                .<ResponseEntity<?>>map(ResponseEntity::ok)
                .orElseGet(() -> ResponseEntity.status(HttpStatus.NOT_FOUND).body(NOT_FOUND));
    }

    record ErrorBody(String error) {
    }
}
