package bench.quarkus.virtual;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletionService;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorCompletionService;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

import jakarta.annotation.PreDestroy;
import jakarta.enterprise.context.ApplicationScoped;

import org.eclipse.microprofile.rest.client.inject.RestClient;

/**
 * The K downstream calls of GET /feed: forked on new virtual threads
 * ({@code Executors.newVirtualThreadPerTaskExecutor()}), each a blocking REST client call, joined in call order;
 * the first failure interrupts the calls still running and is thrown. Sequential: a plain loop.
 */
@ApplicationScoped
public class Feed {

    /** A downstream call that failed or timed out. */
    static final class DownstreamException extends RuntimeException {
        DownstreamException(Throwable cause) {
            super(cause);
        }
    }

    private final ExecutorService virtualThreads = Executors.newVirtualThreadPerTaskExecutor();

    @RestClient
    DownstreamClient client;

    DownstreamClient.Item item(String email, int i) {
        try {
            DownstreamClient.Item item = client.item(email, i);
            if (item == null) {
                throw new IllegalStateException("empty body");
            }
            return item;
        } catch (RuntimeException e) {
            throw new DownstreamException(e);
        }
    }

    List<DownstreamClient.Item> items(String email, int calls, boolean sequential) {
        if (sequential) {
            List<DownstreamClient.Item> items = new ArrayList<>(calls);
            for (int i = 0; i < calls; i++) {
                items.add(item(email, i));
            }
            return items;
        }
        CompletionService<DownstreamClient.Item> done = new ExecutorCompletionService<>(virtualThreads);
        List<Future<DownstreamClient.Item>> futures = new ArrayList<>(calls);
        for (int i = 0; i < calls; i++) {
            int index = i;
            futures.add(done.submit(() -> item(email, index)));
        }
        try {
            for (int n = 0; n < calls; n++) {
                done.take().get();
            }
            List<DownstreamClient.Item> items = new ArrayList<>(calls);
            for (Future<DownstreamClient.Item> future : futures) {
                items.add(future.resultNow());
            }
            return items;
        } catch (ExecutionException e) {
            throw new DownstreamException(e.getCause());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new DownstreamException(e);
        } finally {
            for (Future<DownstreamClient.Item> future : futures) {
                future.cancel(true);
            }
        }
    }

    @PreDestroy
    void close() {
        virtualThreads.shutdownNow();
    }
}
