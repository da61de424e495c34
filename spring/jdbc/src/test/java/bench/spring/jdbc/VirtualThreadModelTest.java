package bench.spring.jdbc;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

/** spring-virtual-jdbc runs each request on a virtual thread. */
class VirtualThreadModelTest extends ThreadModelTest {

    @Test
    void requestRunsOnAVirtualThread() throws Exception {
        Thread thread = handlingThread();

        assertThat(thread.isVirtual()).as("%s is not virtual", thread).isTrue();
    }
}
