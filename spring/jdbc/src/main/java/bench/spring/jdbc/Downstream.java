package bench.spring.jdbc;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletionService;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorCompletionService;
import java.util.concurrent.Future;

import org.springframework.beans.factory.annotation.Qualifier;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.core.task.AsyncTaskExecutor;
import org.springframework.stereotype.Component;
import org.springframework.web.client.RestClient;
import org.springframework.web.client.RestClientException;

/**
 * The downstream calls of {@code GET /feed}: one {@link RestClient} (Boot's auto-configured builder, so Boot's
 * HTTP client detection and {@code spring.http.clients.*} settings apply: the JDK's {@code HttpClient} here, its
 * default connection pool) and Boot's auto-configured {@code applicationTaskExecutor} to run the calls in
 * parallel. That executor is what the profile makes it (Boot reference, "Task Execution and Scheduling"):
 * a {@code ThreadPoolTaskExecutor} of 8 platform threads and an unbounded queue in spring-platform
 * ({@code spring.task.execution.pool.*}), a {@code SimpleAsyncTaskExecutor} starting one virtual thread per
 * task in spring-virtual ({@code spring.threads.virtual.enabled=true}).
 */
@Component
public class Downstream {

    /** One downstream answer, {@code {"email":..,"i":..}}, re-serialised in this order. */
    public record Item(String email, int i) {
    }

    /** Any failed or timed-out call. */
    static final class DownstreamException extends RuntimeException {
        DownstreamException(Throwable cause) {
            super(cause);
        }
    }

    private final RestClient client;
    private final AsyncTaskExecutor executor;

    public Downstream(RestClient.Builder builder, @Value("${downstream.url}") String url,
                      @Qualifier("applicationTaskExecutor") AsyncTaskExecutor executor) {
        this.client = builder.baseUrl(url).build();
        this.executor = executor;
    }

    /** One call; the per-call timeout is the client's read timeout ({@code spring.http.clients.read-timeout}). */
    Item item(String email, int i) {
        try {
            Item item = client.get().uri("/item?email={email}&i={i}", email, i).retrieve().body(Item.class);
            if (item == null) {
                throw new DownstreamException(new IllegalStateException("empty body"));
            }
            return item;
        }
        catch (RestClientException ex) {
            throw new DownstreamException(ex);
        }
    }

    /** K calls one after another. */
    List<Item> sequential(String email, int calls) {
        List<Item> items = new ArrayList<>(calls);
        for (int i = 0; i < calls; i++) {
            items.add(item(email, i));
        }
        return items;
    }

    /**
     * K calls at once on the executor, the answers in call order. The first failure cancels the calls still
     * running (an interrupt: the JDK client abandons the exchange) and is thrown.
     */
    List<Item> parallel(String email, int calls) {
        CompletionService<Item> done = new ExecutorCompletionService<>(executor);
        List<Future<Item>> futures = new ArrayList<>(calls);
        for (int i = 0; i < calls; i++) {
            int index = i;
            futures.add(done.submit(() -> item(email, index)));
        }
        try {
            for (int n = 0; n < calls; n++) {
                done.take().get();
            }
            List<Item> items = new ArrayList<>(calls);
            for (Future<Item> future : futures) {
                items.add(future.resultNow());
            }
            return items;
        }
        catch (ExecutionException ex) {
            throw new DownstreamException(ex.getCause());
        }
        catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
            throw new DownstreamException(ex);
        }
        finally {
            for (Future<Item> future : futures) {
                future.cancel(true);
            }
        }
    }
}
