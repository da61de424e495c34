package bench.spring.webflux;

import java.time.Duration;
import java.util.List;

import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

import reactor.netty.http.client.HttpClient;
import reactor.netty.resources.ConnectionProvider;

import org.springframework.beans.factory.annotation.Value;
import org.springframework.http.client.reactive.ReactorClientHttpConnector;
import org.springframework.stereotype.Component;
import org.springframework.web.reactive.function.client.WebClient;

/**
 * The downstream calls of {@code GET /feed}: one {@link WebClient} from Boot's auto-configured builder, on
 * Reactor Netty's {@code HttpClient} with its default connection pool (Boot's {@code ReactorResourceFactory} uses
 * Reactor Netty's global {@code HttpResources}: a fixed pool of at most 500 connections per remote address and
 * 1000 pending acquisitions, 45 s acquire timeout; Reactor Netty reference, "Connection Pool"). That pool's size is
 * fixed in Reactor Netty's code ({@code TcpResources}: {@code ConnectionProvider.create(name, 500)}): the system
 * property {@code reactor.netty.pool.maxConnections} sizes only pools built without a size, not this one. So
 * {@code bench.downstream.pool-size} (BENCH_DOWNSTREAM_POOL_SIZE), when set, gives the client a
 * {@link ConnectionProvider} of that many connections and twice as many pending acquisitions (the default's
 * ratio), the way Spring Framework's reference ("WebClient", "Configuration", "Reactor Netty") shows.
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
                      @Value("${downstream.timeout-ms}") long timeoutMs,
                      @Value("${bench.downstream.pool-size:0}") int poolSize) {
        if (poolSize > 0) {
            builder = builder.clientConnector(new ReactorClientHttpConnector(HttpClient.create(pool(poolSize))));
        }
        this.client = builder.baseUrl(url).build();
        this.timeout = Duration.ofMillis(timeoutMs);
    }

    static ConnectionProvider pool(int size) {
        return ConnectionProvider.builder("downstream").maxConnections(size).pendingAcquireMaxCount(2 * size).build();
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
