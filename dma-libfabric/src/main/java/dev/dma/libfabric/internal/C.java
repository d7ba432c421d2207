package dev.dma.libfabric.internal;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * The C expression, over the installed libfabric and libc headers, whose value an {@link Abi}
 * constant must equal. The ABI test compiles every such expression with gcc and fails on any
 * difference, so a wrong offset is caught before it corrupts memory at run time.
 */
@Documented
@Retention(RetentionPolicy.RUNTIME)
@Target(ElementType.FIELD)
public @interface C {
  /**
   * The C expression, for example {@code offsetof(struct fi_info, caps)}.
   *
   * @return the expression
   */
  String value();
}
