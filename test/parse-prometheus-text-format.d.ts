// The package ships no types; it returns one object per metric family (name, help, type, metrics).
declare module 'parse-prometheus-text-format' {
  export default function parsePrometheusTextFormat(text: string): unknown[];
}
