package bench.spring.webflux;

import java.util.Optional;

import reactor.core.publisher.Mono;

import org.springframework.http.HttpHeaders;
import org.springframework.http.HttpStatus;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.RestController;

@RestController
public class UserController {

    private static final ErrorBody INVALID_TOKEN = new ErrorBody("invalid_token");
    private static final ErrorBody NOT_FOUND = new ErrorBody("not_found");

    private final JwtVerifier jwtVerifier;
    private final UserRepository users;

    public UserController(JwtVerifier jwtVerifier, UserRepository users) {
        this.jwtVerifier = jwtVerifier;
        this.users = users;
    }

    @GetMapping("/")
    public Mono<ResponseEntity<?>> me(@RequestHeader(name = HttpHeaders.AUTHORIZATION, required = false) String authorization) {
        Optional<String> email = jwtVerifier.email(authorization);
        if (email.isEmpty()) {
            return Mono.just(ResponseEntity.status(HttpStatus.UNAUTHORIZED)
                    .header(HttpHeaders.WWW_AUTHENTICATE, "Bearer error=\"invalid_token\"")
                    .body(INVALID_TOKEN));
        }
        return users.findById(email.get())
                .<ResponseEntity<?>>map(ResponseEntity::ok)
                .defaultIfEmpty(ResponseEntity.status(HttpStatus.NOT_FOUND).body(NOT_FOUND));
    }

    record ErrorBody(String error) {
    }
}
