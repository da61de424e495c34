package bench.spring.webflux;

import java.util.List;
import java.util.Optional;

import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

import org.springframework.http.HttpHeaders;
import org.springframework.http.HttpStatus;
import org.springframework.http.ResponseEntity;
import org.springframework.http.server.reactive.ServerHttpRequest;
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
    public Mono<ResponseEntity<?>> feed(@RequestHeader(name = HttpHeaders.AUTHORIZATION, required = false) String authorization,
                                        ServerHttpRequest request) {
        Optional<String> email = jwtVerifier.email(authorization);
        if (email.isEmpty()) {
            return Mono.just(ResponseEntity.status(HttpStatus.UNAUTHORIZED)
                    .header(HttpHeaders.WWW_AUTHENTICATE, "Bearer error=\"invalid_token\"")
                    .body(INVALID_TOKEN));
        }
        String[] error = new String[1];
        FeedParameters params = FeedParameters.parse(request.getURI().getRawQuery(), error);
        if (params == null) {
            return Mono.just(ResponseEntity.badRequest().body(new ErrorBody(error[0])));
        }
        return users.findById(email.get())
                .flatMap(user -> downstream.items(user.email(), params.calls(), params.sequential())
                        .<ResponseEntity<?>>map(items -> ResponseEntity.ok(new Feed(user, items)))
                        .onErrorResume(ex -> Mono.just(ResponseEntity.status(HttpStatus.BAD_GATEWAY).body(DOWNSTREAM))))
                .defaultIfEmpty(ResponseEntity.status(HttpStatus.NOT_FOUND).body(NOT_FOUND));
    }

    record Feed(User user, List<Downstream.Item> items) {
    }

    /**
     * The token's user. {@code ?queries=N} (1..20, default 1) looks the user up N times, strictly one
     * after another ({@code concatMap}: the next lookup is subscribed when the previous one completes),
     * and returns the row once. The token is checked first: an invalid token is 401 whatever
     * {@code queries} says.
     */
    @GetMapping("/")
    public Mono<ResponseEntity<?>> me(@RequestHeader(name = HttpHeaders.AUTHORIZATION, required = false) String authorization,
                                      ServerHttpRequest request) {
        Optional<String> email = jwtVerifier.email(authorization);
        if (email.isEmpty()) {
            return Mono.just(ResponseEntity.status(HttpStatus.UNAUTHORIZED)
                    .header(HttpHeaders.WWW_AUTHENTICATE, "Bearer error=\"invalid_token\"")
                    .body(INVALID_TOKEN));
        }
        int queries = QueriesParameter.parse(request.getURI().getRawQuery());
        if (queries == QueriesParameter.INVALID) {
            return Mono.just(ResponseEntity.badRequest().body(INVALID_QUERIES));
        }
        Mono<User> user = queries == 1
                ? users.findById(email.get())
                : Flux.range(0, queries)
                        .concatMap(i -> users.findById(email.get()))
                        .takeLast(1)
                        .next();
        return user
                .<ResponseEntity<?>>map(ResponseEntity::ok)
                .defaultIfEmpty(ResponseEntity.status(HttpStatus.NOT_FOUND).body(NOT_FOUND));
    }

    record ErrorBody(String error) {
    }
}
