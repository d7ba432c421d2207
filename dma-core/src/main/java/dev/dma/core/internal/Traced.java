package dev.dma.core.internal;

import dev.dma.api.TransferRequest;
import io.opentelemetry.context.Context;

/**
 * A transfer submitted while tracing is on, with the submitter's context (the parent of its {@code
 * dma.wire} span): what the service puts on the worker's channel instead of the bare request. Only
 * allocated when tracing is installed.
 *
 * @param request the transfer
 * @param parent the submitter's current context
 */
public record Traced(TransferRequest<?> request, Context parent) {}
