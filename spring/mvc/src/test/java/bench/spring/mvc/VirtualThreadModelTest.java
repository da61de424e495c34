package bench.spring.mvc;

import org.junit.jupiter.api.Test;

import org.springframework.test.context.ActiveProfiles;

import static org.assertj.core.api.Assertions.assertThat;

/** With the {@code virtual} profile (spring-virtual), each request runs on a virtual thread. */
@ActiveProfiles("virtual")
class VirtualThreadModelTest extends ThreadModelTest {

    @Test
    void requestRunsOnAVirtualThread() throws Exception {
        Thread thread = handlingThread();

        assertThat(thread.isVirtual()).as("%s is not virtual", thread).isTrue();
    }
}
