package bench.spring.webflux;

import java.time.Duration;
import java.util.List;

import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

import org.springframework.beans.factory.annotation.Value;
import org.springframework.stereotype.Component;
import org.springframework.web.reactive.function.client.WebClient;

/**
 * The downstream calls of {@code GET /feed}: one {@link WebClient} from Boot's auto-configured builder, on
 * Reactor Netty's {@code HttpClient} with its default connection pool (Boot's {@code ReactorResourceFactory} uses
 * Reactor Netty's global {@code HttpResources}: a fixed pool of at most 500 connections per remote address and
 * 1000 pending acquisitions, 45 s acquire timeout; Reactor Netty reference, "Connection Pool").
 * Parallel: {@code Flux.range(0, K).flatMapSequential(call)} (all K subscribed at once, answers in call
 * order); sequential: {@code concatMap}. Each call is bounded by {@code Mono.timeout}; the first error cancels
 * the other calls (their connections are closed, not returned to the pool).
 */
@Component
public class Downstream {

    /** One downstream answer, {@code {"email":..,"i":..}}, re-serialised in this order. */
    public record Item(String email, int i) {
    }

    private final WebClient client;
    private final Duration timeout;

    public Downstream(WebClient.Builder builder, @Value("${downstream.url}") String url,
                      @Value("${downstream.timeout-ms}") long timeoutMs) {
        this.client = builder.baseUrl(url).build();
        this.timeout = Duration.ofMillis(timeoutMs);
    }

    Mono<Item> item(String email, int i) {
        return client.get().uri("/item?email={email}&i={i}", email, i)
                .retrieve()
                .bodyToMono(Item.class)
                .switchIfEmpty(Mono.error(() -> new IllegalStateException("empty body")))
                .timeout(timeout);
    }

    Mono<List<Item>> items(String email, int calls, boolean sequential) {
        Flux<Integer> indexes = Flux.range(0, calls);
        Flux<Item> items = sequential
                ? indexes.concatMap(i -> item(email, i))
                : indexes.flatMapSequential(i -> item(email, i), calls);
        return items.collectList();
    }
}
